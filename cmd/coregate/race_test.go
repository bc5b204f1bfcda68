//go:build race

package main

// raceEnabled builds the gateway with the race detector too.
const raceEnabled = true
