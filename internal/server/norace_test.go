package server_test

// raceEnabled is set by race_test.go under the race detector.
var raceEnabled bool
