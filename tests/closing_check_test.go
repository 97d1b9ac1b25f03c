package tests

import (
	"os"
	"testing"

	"github.com/memtrace/memtrace/runner"
)

// TestMain turns the closing check on for every memtrace the tests run
// (runner.CheckEnv, docs/closing.md): each run that writes its log to a
// file reads it back after its closing lines and fails, with one line and
// runner.CheckStatus, if the agent's figures differ from the report's.
func TestMain(m *testing.M) {
	os.Setenv(runner.CheckEnv, "1")
	os.Exit(m.Run())
}
