//go:build ignore

// rusage runs a command and prints its wall time and peak resident memory:
//
//	go run scripts/rusage.go CMD ARGS... > /dev/null
//	→ on stderr: "rusage wall_s=1.234 maxrss_mb=56"
//	  and "rusage cpu_s=2.345" (user and system CPU of the command)
//
// The command's stdout and stderr pass through.
package main

import (
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"time"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: go run scripts/rusage.go CMD ARGS...")
		os.Exit(2)
	}
	cmd := exec.Command(os.Args[1], os.Args[2:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	t0 := time.Now()
	err := cmd.Run()
	wall := time.Since(t0)
	if cmd.ProcessState == nil {
		fmt.Fprintf(os.Stderr, "rusage: run %s: %v\n", os.Args[1], err)
		os.Exit(1)
	}
	ru := cmd.ProcessState.SysUsage().(*syscall.Rusage)
	fmt.Fprintf(os.Stderr, "rusage wall_s=%.3f maxrss_mb=%d\n", wall.Seconds(), ru.Maxrss/1024)
	cpu := time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	fmt.Fprintf(os.Stderr, "rusage cpu_s=%.3f\n", cpu.Seconds())
	if err != nil {
		os.Exit(1)
	}
}
