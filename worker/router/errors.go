package router

import (
	"errors"

	"coregate/varexpr"
)

// Errors returned by Build, CompileVars and ParseMethods. Returned errors
// wrap one of these; test with errors.Is.
var (
	ErrNoURI  = errors.New("router: route has no uri")
	ErrMethod = errors.New("router: unknown method")
	ErrMode   = errors.New("router: unknown mode")
	ErrIndex  = errors.New("router: route index out of range")
	// The vars errors are varexpr's.
	ErrVars      = varexpr.ErrVars
	ErrOperator  = varexpr.ErrOperator
	ErrRegexp    = varexpr.ErrRegexp
	ErrIPPattern = varexpr.ErrIPPattern
)
