//go:build !linux

package main

import "os/exec"

// dieWithParent: without Linux's parent-death signal, the test's cleanup
// stops its etcd.
func dieWithParent(*exec.Cmd) {}
