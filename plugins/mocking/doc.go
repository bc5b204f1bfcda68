// Package mocking is APISIX's mocking plugin (priority 10900, access
// phase): the route answers with a configured or generated response and
// the upstream is never contacted, so a route with only this plugin needs
// none. Its configuration, defaults and error texts are those of
// apisix/plugins/mocking.lua; README.md shows them.
//
// The body is response_example with its $var and ${var ?? default}
// references resolved per request (an unset variable gives the empty
// string, or the default), or data generated from response_schema: an
// object of the schema's properties, each made from its "example" when it
// has one of its type, else random (strings of 1 to 10 lowercase letters,
// numbers below 10 000, integers 1 to 10 000, arrays of 1 to 3 items),
// encoded as lua-cjson encodes it ("/" escaped, numbers to 14 significant
// digits), or as xml2lua writes it for an XML content type. Properties go
// out in name order (APISIX's follow its Lua table). A delay answers after
// that many seconds on the worker's timer (Ctx.ExitAfter): the event loop
// serves other requests meanwhile.
//
// An instance is used by one event loop: the buffers it renders a body and
// header values into, and its random source, are its own and reused from
// one request to the next; Ctx.Exit and SetResponseHeader copy what they
// get.
package mocking
