//go:build race

package plugintest

// raceEnabled: the race detector allocates, AllocsPerRun does not measure.
const raceEnabled = true
