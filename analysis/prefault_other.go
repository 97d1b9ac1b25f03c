//go:build !linux

package analysis

func prefault[T any](s []T, from, to int) {}

func adviseHuge[T any](s []T) {}

func release[T any](s []T) bool { return false }
