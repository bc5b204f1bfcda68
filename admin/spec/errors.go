package spec

import (
	"errors"
	"strings"
)

// Sentinel errors. Every error this package returns matches one of them with
// errors.Is; the typed errors below carry the detail.
var (
	// ErrSyntax: the input is not well-formed JSON (or YAML).
	ErrSyntax = errors.New("spec: malformed input")
	// ErrInvalid: an object fails validation (*ValidationError).
	ErrInvalid = errors.New("spec: invalid configuration")
	// ErrReference: a Spec refers to an object that is not there, or holds
	// two objects of one kind with the same id (*ReferenceError).
	ErrReference = errors.New("spec: broken reference")
	// ErrEnv: a ${{VAR}} reference names an unset variable that has no
	// default.
	ErrEnv = errors.New("spec: missing environment variable")
)

// ValidationError is a resource that fails APISIX's schema or its checks.
// Error returns the message APISIX's Admin API puts in error_msg, for
// example
//
//	invalid configuration: property "methods" validation failed: failed to validate item 1: matches none of the enum values
//
// Field is the path of the offending field ("methods[0]", "upstream.nodes[1].port",
// `upstream.nodes["127.0.0.1:99999"]`), empty when the error concerns the
// object as a whole. Detail says what is wrong with which value where Msg,
// being APISIX's text, does not (an upstream node, an id:
// `node "127.0.0.1:99999": port 99999 out of range`); empty otherwise.
// It matches ErrInvalid.
type ValidationError struct {
	Field  string
	Msg    string
	Detail string
}

func (e *ValidationError) Error() string { return e.Msg }

// Is reports whether target is ErrInvalid.
func (e *ValidationError) Is(target error) bool { return target == ErrInvalid }

// Explain returns Msg followed by the field and the detail, when there are
// any: the text to show a person (logs, the standalone loader), where
// Error is the text APISIX clients match on.
func (e *ValidationError) Explain() string {
	switch {
	case e.Detail != "" && e.Field != "":
		return e.Msg + " (" + e.Field + ": " + e.Detail + ")"
	case e.Detail != "":
		return e.Msg + " (" + e.Detail + ")"
	}
	return e.Msg
}

// prefixed returns e with its message prefixed, as APISIX's callers of
// the schema check do ("invalid configuration: ").
func (e *ValidationError) prefixed(p string) *ValidationError {
	e.Msg = p + e.Msg
	return e
}

// SyntaxError is input that is not well-formed JSON. Error returns the text
// APISIX's Admin API puts in error_msg ("invalid request body: …"). It
// matches ErrSyntax.
type SyntaxError struct {
	Msg string
}

func (e *SyntaxError) Error() string { return "invalid request body: " + e.Msg }

// Is reports whether target is ErrSyntax.
func (e *SyntaxError) Is(target error) bool { return target == ErrSyntax }

// ReferenceError is a cross-reference Spec.Check rejects, for example
// "route 1: upstream_id 9 not found" or "upstream 3: duplicate id". It
// matches ErrReference.
type ReferenceError struct {
	Kind  string // "route", "service", "upstream", "consumer", "plugin_config", "global_rule"
	ID    string // the id of the object at fault
	Field string // "upstream_id", "service_id", "plugin_config_id", "id"
	Ref   string // the id it refers to; empty for duplicates and missing ids
	Msg   string // "not found", "duplicate id", "missing id"
}

func (e *ReferenceError) Error() string {
	var b strings.Builder
	b.WriteString(e.Kind)
	b.WriteByte(' ')
	b.WriteString(e.ID)
	b.WriteString(": ")
	if e.Ref != "" {
		b.WriteString(e.Field)
		b.WriteByte(' ')
		b.WriteString(e.Ref)
		b.WriteByte(' ')
	}
	b.WriteString(e.Msg)
	return b.String()
}

// Is reports whether target is ErrReference.
func (e *ReferenceError) Is(target error) bool { return target == ErrReference }

// EnvError is a ${{VAR}} reference to an unset variable without a default.
// Error returns APISIX's text ("failed to handle configuration: can't find
// environment variable VAR"). It matches ErrEnv.
type EnvError struct {
	Var string
}

func (e *EnvError) Error() string {
	return "failed to handle configuration: can't find environment variable " + e.Var
}

// Is reports whether target is ErrEnv.
func (e *EnvError) Is(target error) bool { return target == ErrEnv }

// problem is a validation failure while its message is being built from the
// inside out; it becomes a *ValidationError at the top.
type problem struct {
	field  string
	msg    string
	detail string
}

// in nests p under the object property prop, as the schema validator does.
func (p *problem) in(prop string) *problem {
	p.msg = `property "` + prop + `" validation failed: ` + p.msg
	switch {
	case p.field == "":
		p.field = prop
	case p.field[0] == '[':
		p.field = prop + p.field // an item or a quoted member: nodes[0], nodes["a:1"]
	default:
		p.field = prop + "." + p.field
	}
	return p
}

// schemaErr turns a schema problem into the error the Admin API reports.
func (p *problem) schemaErr() *ValidationError {
	return &ValidationError{Field: p.field, Msg: "invalid configuration: " + p.msg, Detail: p.detail}
}
