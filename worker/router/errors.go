package router

import "errors"

// Errors returned by Build, CompileVars and ParseMethods. Returned errors
// wrap one of these; test with errors.Is.
var (
	ErrNoURI     = errors.New("router: route has no uri")
	ErrMethod    = errors.New("router: unknown method")
	ErrMode      = errors.New("router: unknown mode")
	ErrVars      = errors.New("router: invalid vars expression")
	ErrOperator  = errors.New("router: invalid vars operator")
	ErrRegexp    = errors.New("router: invalid regular expression")
	ErrIPPattern = errors.New("router: invalid ip or cidr")
)
