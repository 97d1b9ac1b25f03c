// Package config reads memtrace's settings from a config file (--config or
// MEMTRACE_CONFIG) and MEMTRACE_* environment variables, in mem_monitor's
// key=value format, and merges them with the command line: flags set
// explicitly win over the environment, which wins over the file, which wins
// over the defaults. See docs/config.md.
package config
