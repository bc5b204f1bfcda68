package spec

import (
	"errors"
	"math"
	"regexp"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

var envRef = regexp.MustCompile(`\$\{\{\s*(\w+[:=]?.*?)\s*\}\}`)

// ResolveEnv substitutes ${{VAR}} and ${{VAR:=default}} in the mapping keys
// and string values of a YAML tree, as APISIX's resolve_conf_var does:
// lookup (os.LookupEnv in production) gives the value, an empty one
// included; an unset variable takes its default, and one without a default
// is an *EnvError. A value in which a variable was substituted and that
// then reads as a number or as true/false becomes that number or boolean,
// quoted or not. Anchored nodes are resolved once, where they are defined.
func ResolveEnv(n *yaml.Node, lookup func(string) (string, bool)) error {
	if n == nil {
		return nil
	}
	switch n.Kind {
	case yaml.DocumentNode, yaml.SequenceNode:
		for _, c := range n.Content {
			if err := ResolveEnv(c, lookup); err != nil {
				return err
			}
		}
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := n.Content[i]
			if k.Kind == yaml.ScalarNode && k.ShortTag() == "!!str" {
				s, _, err := substituteEnv(k.Value, lookup)
				if err != nil {
					return err
				}
				k.Value = s
			}
			if err := ResolveEnv(n.Content[i+1], lookup); err != nil {
				return err
			}
		}
	case yaml.ScalarNode:
		if n.ShortTag() != "!!str" {
			return nil
		}
		s, used, err := substituteEnv(n.Value, lookup)
		if err != nil {
			return err
		}
		if !used {
			return nil
		}
		n.Value = s
		f, isNum := LuaNumber([]byte(s))
		switch i, isInt := luaInteger(s, f); {
		case isNum && isInt:
			n.Tag, n.Value, n.Style = "!!int", strconv.FormatInt(i, 10), 0
		case isNum && !math.IsInf(f, 0):
			n.Tag, n.Value, n.Style = "!!float", strconv.FormatFloat(f, 'g', -1, 64), 0
		case s == "true" || s == "false":
			n.Tag, n.Style = "!!bool", 0
		}
	}
	return nil
}

// substituteEnv replaces every ${{…}} in s.
func substituteEnv(s string, lookup func(string) (string, bool)) (string, bool, error) {
	if !strings.Contains(s, "${{") {
		return s, false, nil
	}
	var err error
	used := false
	out := envRef.ReplaceAllStringFunc(s, func(m string) string {
		name := envRef.FindStringSubmatch(m)[1]
		def, hasDef := "", false
		if i := strings.Index(name, ":="); i >= 0 {
			def, hasDef = strings.TrimSpace(name[i+2:]), true
			name = name[:i]
		}
		if v, ok := lookup(name); ok {
			used = true
			return v
		}
		if hasDef {
			used = true
			return def
		}
		if err == nil {
			err = &EnvError{Var: name}
		}
		return ""
	})
	if err != nil {
		return "", false, err
	}
	return out, used, nil
}

// maxAliasNodes bounds how many nodes YAMLToJSON visits through aliases,
// so that aliases cannot expand a small document without end.
const maxAliasNodes = 1_000_000

// YAMLToJSON converts a YAML tree to compact JSON, keeping mapping order.
// Aliases and merge keys (<<) are expanded; timestamps and binary values
// become strings; a mapping key must be a scalar; .inf and .nan are errors.
func YAMLToJSON(n *yaml.Node) ([]byte, error) {
	c := yamlConv{}
	return c.value(nil, n)
}

type yamlConv struct {
	inAlias int // depth of alias expansion
	visited int // nodes visited inside an alias expansion
}

var errYAMLTooLarge = errors.New("yaml document too large after alias expansion")

func (c *yamlConv) value(b []byte, n *yaml.Node) ([]byte, error) {
	if c.inAlias > 0 {
		if c.visited++; c.visited > maxAliasNodes {
			return nil, errYAMLTooLarge
		}
	}
	switch n.Kind {
	case 0: // the empty document
		return append(b, "null"...), nil
	case yaml.DocumentNode:
		if len(n.Content) == 0 {
			return append(b, "null"...), nil
		}
		return c.value(b, n.Content[0])
	case yaml.AliasNode:
		c.inAlias++
		b, err := c.value(b, n.Alias)
		c.inAlias--
		return b, err
	case yaml.SequenceNode:
		b = append(b, '[')
		for i, e := range n.Content {
			if i > 0 {
				b = append(b, ',')
			}
			var err error
			if b, err = c.value(b, e); err != nil {
				return nil, err
			}
		}
		return append(b, ']'), nil
	case yaml.MappingNode:
		pairs, err := c.pairs(n, 0)
		if err != nil {
			return nil, err
		}
		b = append(b, '{')
		for i, p := range pairs {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendJSONString(b, p.key)
			b = append(b, ':')
			if b, err = c.value(b, p.val); err != nil {
				return nil, err
			}
		}
		return append(b, '}'), nil
	case yaml.ScalarNode:
		return scalarJSON(b, n)
	}
	return nil, errors.New("unsupported yaml node")
}

type yamlPair struct {
	key string
	val *yaml.Node
}

// pairs lists a mapping's members in order with merge keys (<<) expanded
// where they stand; explicit keys win over merged ones, a later key over an
// earlier one.
func (c *yamlConv) pairs(n *yaml.Node, depth int) ([]yamlPair, error) {
	if depth > 32 {
		return nil, errors.New("yaml merge keys nested too deep")
	}
	explicit := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if k := Unalias(n.Content[i]); k.Kind == yaml.ScalarNode && k.ShortTag() != "!!merge" {
			explicit[k.Value] = true
		}
	}
	var out []yamlPair
	index := map[string]int{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if k.Kind == yaml.ScalarNode && k.ShortTag() == "!!merge" {
			srcs := []*yaml.Node{v}
			if v.Kind == yaml.SequenceNode {
				srcs = v.Content
			}
			for _, s := range srcs {
				s = Unalias(s)
				if s.Kind != yaml.MappingNode {
					return nil, errors.New("yaml merge key needs a mapping")
				}
				ps, err := c.pairs(s, depth+1)
				if err != nil {
					return nil, err
				}
				for _, p := range ps {
					if _, seen := index[p.key]; !seen && !explicit[p.key] {
						index[p.key] = len(out)
						out = append(out, p)
					}
				}
			}
			continue
		}
		k = Unalias(k)
		if k.Kind != yaml.ScalarNode {
			return nil, errors.New("yaml mapping key at line " + strconv.Itoa(k.Line) + " is not a scalar")
		}
		if j, seen := index[k.Value]; seen {
			out[j].val = v
			continue
		}
		index[k.Value] = len(out)
		out = append(out, yamlPair{k.Value, v})
	}
	return out, nil
}

func scalarJSON(b []byte, n *yaml.Node) ([]byte, error) {
	switch n.ShortTag() {
	case "!!null":
		return append(b, "null"...), nil
	case "!!bool":
		var v bool
		if err := n.Decode(&v); err != nil {
			return nil, err
		}
		return strconv.AppendBool(b, v), nil
	case "!!int":
		var v any
		if err := n.Decode(&v); err != nil {
			return nil, err
		}
		switch x := v.(type) {
		case int:
			return strconv.AppendInt(b, int64(x), 10), nil
		case int64:
			return strconv.AppendInt(b, x, 10), nil
		case uint64:
			return strconv.AppendUint(b, x, 10), nil
		case float64:
			return appendFloat(b, x, n)
		}
		return appendJSONString(b, n.Value), nil
	case "!!float":
		var v float64
		if err := n.Decode(&v); err != nil {
			return nil, err
		}
		return appendFloat(b, v, n)
	}
	return appendJSONString(b, n.Value), nil
}

func appendFloat(b []byte, f float64, n *yaml.Node) ([]byte, error) {
	if math.IsInf(f, 0) || math.IsNaN(f) {
		return nil, errors.New("yaml value " + n.Value + " at line " + strconv.Itoa(n.Line) + " is not a JSON number")
	}
	if f == math.Trunc(f) && math.Abs(f) < 1e15 {
		return strconv.AppendFloat(b, f, 'f', -1, 64), nil
	}
	return strconv.AppendFloat(b, f, 'g', -1, 64), nil
}

// JSONToYAML parses a JSON document into a YAML tree (mapping order kept),
// so that JSON files go through ResolveEnv and YAMLToJSON like YAML ones.
// Errors are *SyntaxError.
func JSONToYAML(data []byte) (*yaml.Node, error) {
	v, err := parseJSON(data)
	if err != nil {
		return nil, err
	}
	return &yaml.Node{Kind: yaml.DocumentNode, Content: []*yaml.Node{jvalToYAML(v)}}, nil
}

func jvalToYAML(v *jval) *yaml.Node {
	switch v.kind {
	case jNull:
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!null", Value: "null"}
	case jBool:
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!bool", Value: strconv.FormatBool(v.b)}
	case jNumber:
		tag := "!!float"
		if _, err := strconv.ParseInt(v.s, 10, 64); err == nil {
			tag = "!!int"
		}
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: tag, Value: v.s}
	case jString:
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: v.s}
	case jArray:
		n := &yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq"}
		for _, e := range v.arr {
			n.Content = append(n.Content, jvalToYAML(e))
		}
		return n
	}
	n := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
	for _, m := range v.obj {
		n.Content = append(n.Content, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: m.key}, jvalToYAML(m.val))
	}
	return n
}

// Unalias follows a YAML alias node to the node it names; other nodes come
// back as they are.
func Unalias(n *yaml.Node) *yaml.Node {
	for n != nil && n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	return n
}
