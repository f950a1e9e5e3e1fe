package resolver

// Loading one tool entry of a registry file: its fields, its native forms
// and its parameter schema.

import (
	"fmt"
	"strings"
)

func (l *loader) tool(r *Registry, i int, tn *jnode) {
	path := fmt.Sprintf("tools[%d]", i)
	if tn.kind != jObject {
		l.addf("%s: is %s; want a tool object", path, tn.kind)
		return
	}
	l.unknownKeys(path, tn, toolKeys)
	t := Tool{Available: true}
	// A tool whose other fields are bad still gets its name indexed, so
	// that lists naming it are not also reported as unknown; the load
	// fails anyway.
	nameOK := false
	if n := tn.get("name"); n == nil {
		l.addf("%s: name missing; add a name matching %s", path, namePatternText)
	} else if s, good := l.str(path+".name", n); good {
		if !validName(s) {
			l.addf("%s: name %q must match %s; use letters, digits, '_' and '-', starting with a letter, at most 64 bytes", path, s, namePatternText)
		} else {
			t.Name = s
			path = fmt.Sprintf("tools[%d] %q", i, s)
			if first, dup := l.firstAt[s]; dup {
				l.addf("%s: duplicate tool name (first at tools[%d]); rename or remove one", path, first)
			} else {
				nameOK = true
			}
		}
	}
	if n := tn.get("description"); n == nil {
		l.addf("%s: description missing; write what the tool does, the model reads it", path)
	} else if s, good := l.str(path+".description", n); good {
		if strings.TrimSpace(s) == "" {
			l.addf("%s: description is empty; write what the tool does, the model reads it", path)
		}
		t.Description = s
	}
	if n := tn.get("parameters"); n == nil {
		l.addf(`%s: parameters missing; set a JSON Schema object such as {"type":"object","properties":{}}`, path)
	} else if l.schema(path+".parameters", n) {
		t.Parameters = appendCanonical(nil, n)
	}
	if n := tn.get("available"); n != nil {
		if n.kind != jBool {
			l.addf("%s.available: is %s; want true or false (absent means true)", path, n.kind)
		} else {
			t.Available = n.b
		}
	}
	if n := tn.get("permission"); n != nil {
		if s, good := l.str(path+".permission", n); good {
			if s != "" && !validPermission(s) {
				l.addf(`%s.permission %q: want lowercase letters, digits and "_.:-", starting with a letter, at most 64 bytes, such as "read"`, path, s)
			}
			t.Permission = s
		}
	}
	if n := tn.get("native"); n != nil && n.kind != jNull {
		t.Native = l.native(path+".native", n, t.Name)
	}
	var flag int8
	if n := tn.get("defer"); n != nil {
		if n.kind != jBool {
			l.addf("%s.defer: is %s; want true (deferred) or false (resident)", path, n.kind)
		} else if n.b {
			flag = 1
		} else {
			flag = -1
		}
	}
	if n := tn.get("embedding"); n != nil && n.kind != jNull {
		t.Embedding = l.embedding(path+".embedding", n, t.Name)
	}
	if !nameOK {
		return
	}
	if flag > 0 && t.Name == ToolSearch {
		l.addf("%s.defer: %q can never be deferred (see docs/semantics.md#deferral); remove the flag", path, ToolSearch)
	}
	l.firstAt[t.Name] = i
	r.index[t.Name] = int32(len(r.tools))
	r.tools = append(r.tools, t)
	r.toolFlag = append(r.toolFlag, flag)
}

// native reads a tool's provider-native forms (seed §8): an object of
// provider ("anthropic", "openai") to the tool object that provider's
// rendering emits instead of a function. Each is a JSON object with a
// string "type" other than "function"; Anthropic's also names the tool
// ("name" equal to the tool's name: the model calls it by that name), and
// the engine sets the cache breakpoint itself, so "cache_control" is
// refused.
func (l *loader) native(path string, n *jnode, name string) Native {
	var out Native
	if n.kind != jObject {
		l.addf(`%s: is %s; want an object such as {"anthropic": {"type": "web_search_20250305", "name": %q}}`, path, n.kind, name)
		return out
	}
	l.unknownKeys(path, n, nativeKeys)
	for _, provider := range nativeKeys {
		v := n.get(provider)
		if v == nil || v.kind == jNull {
			continue
		}
		p := path + "." + provider
		if v.kind != jObject {
			l.addf("%s: is %s; want the provider's tool object", p, v.kind)
			continue
		}
		ok := true
		switch ty := v.get("type"); {
		case ty == nil || ty.kind != jString || ty.s == "":
			l.addf(`%s: "type" missing or not a string; set the provider's built-in tool type, e.g. "web_search"`, p)
			ok = false
		case ty.s == "function":
			l.addf(`%s.type: "function" is the default rendering; remove the native form instead`, p)
			ok = false
		}
		nm := v.get("name")
		switch {
		case provider == "anthropic" && (nm == nil || nm.kind != jString || nm.s != name):
			l.addf(`%s.name: want %q, the tool's name (the model calls the server tool by it)`, p, name)
			ok = false
		case nm != nil && (nm.kind != jString || nm.s != name):
			l.addf(`%s.name: want %q, the tool's name, or no name`, p, name)
			ok = false
		}
		if v.get("cache_control") != nil {
			l.addf(`%s: remove "cache_control"; the engine places the cache breakpoint on the last tool`, p)
			ok = false
		}
		if !ok {
			continue
		}
		b := appendCanonical(nil, v)
		if provider == "anthropic" {
			out.Anthropic = b
		} else {
			out.OpenAI = b
		}
	}
	return out
}

// schema checks the shape a provider needs of a tool input schema: an
// object with "type":"object", "properties" an object of schema objects,
// "required" an array of property names.
func (l *loader) schema(path string, n *jnode) bool {
	if n.kind != jObject {
		l.addf(`%s: is %s; want a JSON Schema object such as {"type":"object","properties":{}}`, path, n.kind)
		return false
	}
	ok := true
	if tn := n.get("type"); tn == nil {
		l.addf(`%s: "type" missing; add "type":"object" (tool input schemas are objects)`, path)
		ok = false
	} else if tn.kind != jString || tn.s != "object" {
		l.addf(`%s.type: is %s; want "object" (tool input schemas are objects)`, path, describe(tn))
		ok = false
	}
	props := n.get("properties")
	if props != nil {
		if props.kind != jObject {
			l.addf("%s.properties: is %s; want an object of property name to schema", path, props.kind)
			ok = false
			props = nil
		} else {
			for i, k := range props.keys {
				if v := props.vals[i]; v.kind != jObject && v.kind != jBool {
					l.addf("%s.properties.%s: is %s; want a schema object", path, k, v.kind)
					ok = false
				}
			}
		}
	}
	if req := n.get("required"); req != nil {
		if req.kind != jArray {
			l.addf("%s.required: is %s; want an array of property names", path, req.kind)
			return false
		}
		for i, e := range req.elems {
			switch {
			case e.kind != jString:
				l.addf("%s.required[%d]: is %s; want a property name string", path, i, e.kind)
				ok = false
			case props == nil || props.get(e.s) == nil:
				l.addf("%s.required[%d]: %q is not in properties; add the property or remove it from required", path, i, e.s)
				ok = false
			}
		}
	}
	return ok
}

func describe(n *jnode) string {
	if n.kind == jString {
		return fmt.Sprintf("%q", n.s)
	}
	return n.kind.String()
}
