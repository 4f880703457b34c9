//go:build race

package main

// raceEnabled says the race detector is on: the slowest tests run fewer cases.
const raceEnabled = true
