//go:build race

package stitching

// raceEnabled says the race detector is on: the slowest tests, numeric
// checks whose concurrency the other tests cover, run fewer cases
// (underRace), or none, so that `go test -race ./...` ends within go
// test's 10 minutes on two cores.
const raceEnabled = true

// RaceEnabled is raceEnabled for the external test package.
const RaceEnabled = raceEnabled
