// Package requestid is APISIX's request-id plugin (priority 12015;
// rewrite and header_filter phases): an id in a header of the request
// going upstream and of its response. Its configuration, defaults and
// algorithms (uuid, uuidv7, nanoid, ksuid, range_id) are those of
// apisix/plugins/request-id.lua; README.md shows them.
//
// The rewrite phase sets a new id on a request without the header (or
// with it empty), as Ctx.SetRequestHeader; one the client sent is kept.
// The header_filter phase, with include_in_response, sets the request's
// id on the response unless the response has the header already
// (Ctx.ResponseHeader: the upstream's, as APISIX reads ngx.resp.get_headers).
//
// Randomness is math/rand/v2's runtime source (ChaCha8 per thread,
// seeded by the system, no lock). An id is made of up to 192 bits (128
// random bits; uuidv7's millisecond and counter are in them; ksuid's
// second beside them), which the request keeps with Ctx.Keep, so that
// header_filter formats the same id again: nothing of a request is held
// by the instance between its phases. range_id's characters come from a
// PCG seeded with the request's 128 bits.
//
// An instance runs on one event loop: its id buffer (valid until the next
// phase call; the Ctx copies it), its PCG and uuidv7's last millisecond
// and counter are written by its phases, so it is not safe for
// concurrent use. Its phases allocate nothing.
//
// Differences from APISIX: header_name must be a header field name, and
// range_id.length at most 4096; uuidv7, past its counter's end within a
// millisecond, takes the next millisecond rather than wait for the clock;
// $apisix_request_id is not set.
package requestid
