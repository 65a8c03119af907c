package manifest

import (
	"bytes"
	"encoding/json"
	"io"
	"slices"
	"unicode/utf8"
)

// The manifest is parsed into an ordered tree rather than straight into structs:
// encoding/json matches struct fields case-insensitively and lets a duplicate key
// silently overwrite the first, and both would let a tenant smuggle a second
// "image" past a reviewer of the raw payload. The tree keeps exact keys, refuses
// duplicates, and lets every field error name the field in a tenant-safe way.

type nodeKind uint8

const (
	kindNull nodeKind = iota
	kindBool
	kindNumber
	kindString
	kindArray
	kindObject
)

func (k nodeKind) String() string {
	return [...]string{"null", "a boolean", "a number", "a string", "an array", "an object"}[k]
}

// node is one JSON value. For objects, keys[i] maps to kids[i] in document order;
// for arrays, kids are the elements.
type node struct {
	kind nodeKind
	str  string // string value, or the literal of a number
	b    bool
	keys []string
	kids []*node
}

// eachMember calls f on each member of the object n in document order,
// skipping null values (a null field counts as absent), until f fails.
func (n *node) eachMember(f func(key string, v *node) error) error {
	for i, key := range n.keys {
		if n.kids[i].kind == kindNull {
			continue
		}
		if err := f(key, n.kids[i]); err != nil {
			return err
		}
	}
	return nil
}

// get returns the value of key in an object, or nil when absent.
func (n *node) get(key string) *node {
	if i := slices.Index(n.keys, key); i >= 0 {
		return n.kids[i]
	}
	return nil
}

const (
	// maxDepth is far beyond the schema's own depth (5) yet keeps recursion bounded.
	maxDepth = 16
	// maxNodes bounds the memory a 1 MiB payload of tiny values ("[0,0,0,…]") can
	// cost; the largest sensible manifest is a small fraction of it.
	maxNodes = 100_000
)

type treeParser struct {
	dec   *json.Decoder
	nodes int
}

// parseTree parses data as exactly one JSON value: valid UTF-8, no duplicate object
// keys, no trailing data, bounded depth and size.
func parseTree(data []byte) (*node, error) {
	if !utf8.Valid(data) {
		return nil, invalid("manifest is not valid UTF-8")
	}
	p := &treeParser{dec: json.NewDecoder(bytes.NewReader(data))}
	p.dec.UseNumber()
	root, err := p.value(0)
	if err != nil {
		return nil, err
	}
	if _, err := p.dec.Token(); err != io.EOF {
		return nil, invalid("manifest has trailing data after the JSON value")
	}
	return root, nil
}

func (p *treeParser) syntaxError() error {
	return invalid("manifest is not valid JSON (near byte %d)", p.dec.InputOffset())
}

func (p *treeParser) value(depth int) (*node, error) {
	if depth > maxDepth {
		return nil, invalid("manifest nests deeper than %d levels", maxDepth)
	}
	p.nodes++
	if p.nodes > maxNodes {
		return nil, invalid("manifest has more than %d JSON values", maxNodes)
	}
	tok, err := p.dec.Token()
	if err != nil {
		return nil, p.syntaxError()
	}
	switch t := tok.(type) {
	case nil:
		return &node{kind: kindNull}, nil
	case bool:
		return &node{kind: kindBool, b: t}, nil
	case json.Number:
		return &node{kind: kindNumber, str: string(t)}, nil
	case string:
		return &node{kind: kindString, str: t}, nil
	case json.Delim:
		switch t {
		case '{':
			return p.object(depth)
		case '[':
			return p.array(depth)
		}
	}
	return nil, p.syntaxError()
}

func (p *treeParser) object(depth int) (*node, error) {
	n := &node{kind: kindObject}
	var seen map[string]struct{}
	for p.dec.More() {
		tok, err := p.dec.Token()
		if err != nil {
			return nil, p.syntaxError()
		}
		key, ok := tok.(string)
		if !ok {
			return nil, p.syntaxError()
		}
		if seen == nil {
			seen = make(map[string]struct{})
		}
		if _, dup := seen[key]; dup {
			return nil, invalid("manifest has duplicate key %s", excerpt(key))
		}
		seen[key] = struct{}{}
		v, err := p.value(depth + 1)
		if err != nil {
			return nil, err
		}
		n.keys = append(n.keys, key)
		n.kids = append(n.kids, v)
	}
	if tok, err := p.dec.Token(); err != nil || tok != json.Delim('}') {
		return nil, p.syntaxError()
	}
	return n, nil
}

func (p *treeParser) array(depth int) (*node, error) {
	n := &node{kind: kindArray}
	for p.dec.More() {
		v, err := p.value(depth + 1)
		if err != nil {
			return nil, err
		}
		n.kids = append(n.kids, v)
	}
	if tok, err := p.dec.Token(); err != nil || tok != json.Delim(']') {
		return nil, p.syntaxError()
	}
	return n, nil
}
