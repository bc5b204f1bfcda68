package spec

import "encoding/json"

// DecodeRoute decodes a route and validates it: APISIX's route schema
// (schema/route.json), then the checks a schema cannot express
// (validate.go). Errors are *SyntaxError or *ValidationError and their
// text is what the Admin API answers.
func DecodeRoute(data []byte) (*Route, error) {
	return decode(data, KindRoute, checkRouteTree, (*Route).checkValues)
}

// DecodeService is DecodeRoute for a service.
func DecodeService(data []byte) (*Service, error) {
	return decode(data, KindService, checkServiceTree, (*Service).checkValues)
}

// DecodeUpstream is DecodeRoute for an upstream.
func DecodeUpstream(data []byte) (*Upstream, error) {
	return decode(data, KindUpstream, checkUpstreamTree, (*Upstream).checkValues)
}

func decode[T any](data []byte, kind string, tree func(*jval) error, values func(*T) error) (*T, error) {
	v, err := parseJSON(data)
	if err != nil {
		return nil, err
	}
	if err := tree(v); err != nil {
		return nil, err
	}
	obj := new(T)
	if err := objectSchema(kind).decodeValid(v, obj); err != nil {
		return nil, err
	}
	if err := values(obj); err != nil {
		return nil, err
	}
	return obj, nil
}

// Validate checks a route, decoded or built in code, as DecodeRoute does.
// The error is a *ValidationError whose text is APISIX's. It does not look
// at other objects (Spec.Check does) nor inside plugin configs (beyond
// each being an object).
func (r *Route) Validate() error { return validate(r, checkRouteTree, r.checkValues) }

// Validate checks a service as DecodeService does.
func (s *Service) Validate() error { return validate(s, checkServiceTree, s.checkValues) }

// Validate checks an upstream as DecodeUpstream does.
func (u *Upstream) Validate() error { return validate(u, checkUpstreamTree, u.checkValues) }

// validate checks obj's JSON form, as it would be stored, then its values.
func validate(obj any, tree func(*jval) error, values func() error) error {
	b, err := json.Marshal(obj)
	if err != nil {
		return &ValidationError{Msg: "invalid configuration: " + err.Error()}
	}
	v, err := parseJSON(b)
	if err != nil {
		return err
	}
	if err := tree(v); err != nil {
		return err
	}
	return values()
}
