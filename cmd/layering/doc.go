// Package layering holds the module's import rules as a test: which
// packages may depend on which (docs/architecture.md, "Packages and import rules").
// The test reads the dependency graph from `go list -deps -json ./...` and
// fails naming the importing package, what it imports, the path through
// which it does, and the rule broken. It has no code of its own; `make
// check` runs it.
package layering
