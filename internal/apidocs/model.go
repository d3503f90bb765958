package apidocs

import (
	"encoding/json"
	"fmt"
	"html"
	"html/template"
	"net/url"
	"strings"
)

// page is what the reference shows, built once from the document.
type page struct {
	Title, Version, Summary string
	Description             template.HTML
	Servers                 []serverView
	Security                []securityView
	Tags                    []tagView
	Webhooks                []operationView
	Schemas                 []schemaView
}

type serverView struct {
	URL, Default string
	Description  template.HTML
}

type securityView struct {
	Name, Scheme string
	Description  template.HTML
}

type tagView struct {
	Name, ID    string
	Description template.HTML
	Operations  []operationView
}

type operationView struct {
	ID, Method, Path, Summary string
	Description               template.HTML
	Servers                   []string
	Security                  []string
	Parameters                []fieldView
	Body                      *bodyView
	Responses                 []responseView
	Callbacks                 []callbackView
}

type bodyView struct {
	Required bool
	Media    []mediaView
}

type mediaView struct {
	Type     string
	Schema   template.HTML
	Fields   []fieldView
	Examples []exampleView
}

type exampleView struct{ Name, Text string }

type responseView struct {
	Status      string
	Description template.HTML
	Headers     []fieldView
	Media       []mediaView
}

type callbackView struct {
	Name, Expression string
	Operations       []operationView
}

type fieldView struct {
	Name, In    string
	Required    bool
	Type        template.HTML
	Description template.HTML
}

type schemaView struct {
	Name, ID    string
	Description template.HTML
	Type        template.HTML
	Fields      []fieldView
}

var methods = []string{"get", "put", "post", "delete", "options", "head", "patch", "trace"}

// build reads the document into the page.
func build(raw []byte) (*page, error) {
	v, err := decode(raw)
	if err != nil {
		return nil, fmt.Errorf("read the OpenAPI document: %w", err)
	}
	doc, ok := v.(object)
	if !ok {
		return nil, fmt.Errorf("the OpenAPI document is not an object")
	}
	b := builder{doc: doc}
	info := doc.obj("info")
	p := &page{Title: info.str("title"), Version: info.str("version"), Summary: info.str("summary"),
		Description: markdown(info.str("description"))}
	p.Servers = b.servers(doc.arr("servers"))
	for _, s := range doc.obj("components").obj("securitySchemes") {
		o, _ := s.val.(object)
		p.Security = append(p.Security, securityView{Name: s.key, Scheme: o.str("type") + " " + o.str("scheme"), Description: markdown(o.str("description"))})
	}

	byTag := map[string][]operationView{}
	var tagOrder []string
	addTag := func(name string) {
		if _, ok := byTag[name]; !ok {
			byTag[name] = nil
			tagOrder = append(tagOrder, name)
		}
	}
	tagDescriptions := map[string]string{}
	for _, t := range doc.arr("tags") {
		o, _ := t.(object)
		addTag(o.str("name"))
		tagDescriptions[o.str("name")] = o.str("description")
	}
	for _, m := range doc.obj("paths") {
		item, _ := m.val.(object)
		for _, op := range b.operations(m.key, item) {
			tag := op.tag
			if tag == "" {
				tag = "Other"
			}
			addTag(tag)
			byTag[tag] = append(byTag[tag], op.view)
		}
	}
	for _, name := range tagOrder {
		if len(byTag[name]) == 0 {
			continue
		}
		p.Tags = append(p.Tags, tagView{Name: name, ID: "tag-" + anchor(name), Description: markdown(tagDescriptions[name]), Operations: byTag[name]})
	}
	for _, m := range doc.obj("webhooks") {
		item, _ := m.val.(object)
		for _, op := range b.operations(m.key, item) {
			op.view.Path = "your " + m.key + " URL"
			op.view.ID = "webhook-" + anchor(m.key) + "-" + strings.ToLower(op.view.Method)
			p.Webhooks = append(p.Webhooks, op.view)
		}
	}
	for _, m := range doc.obj("components").obj("schemas") {
		s, _ := m.val.(object)
		p.Schemas = append(p.Schemas, schemaView{Name: m.key, ID: "schema-" + anchor(m.key), Description: markdown(s.str("description")),
			Type: b.typeOf(s), Fields: b.fields(s, "")})
	}
	return p, nil
}

type builder struct{ doc object }

type taggedOperation struct {
	tag  string
	view operationView
}

func (b builder) operations(path string, item object) []taggedOperation {
	item = b.resolve(item)
	var out []taggedOperation
	for _, method := range methods {
		op := item.obj(method)
		if op == nil {
			continue
		}
		v := operationView{ID: "op-" + anchor(op.str("operationId")), Method: strings.ToUpper(method), Path: path,
			Summary: op.str("summary"), Description: markdown(op.str("description"))}
		if v.ID == "op-" {
			v.ID = "op-" + method + anchor(path)
		}
		for _, s := range b.servers(item.arr("servers")) {
			v.Servers = append(v.Servers, s.URL)
		}
		security := op.arr("security")
		if security == nil {
			security = b.doc.arr("security")
		}
		for _, req := range security {
			for _, m := range asObject(req) {
				v.Security = append(v.Security, m.key)
			}
		}
		params := append(append([]any{}, item.arr("parameters")...), op.arr("parameters")...)
		for _, pr := range params {
			p := b.resolve(asObject(pr))
			v.Parameters = append(v.Parameters, fieldView{Name: p.str("name"), In: p.str("in"), Required: p.get("required") == true,
				Type: b.typeOf(p.obj("schema")), Description: markdown(p.str("description"))})
		}
		if rb := b.resolve(op.obj("requestBody")); rb != nil {
			v.Body = &bodyView{Required: rb.get("required") == true, Media: b.media(rb.obj("content"), true)}
		}
		for _, r := range op.obj("responses") {
			ref := asObject(r.val)
			resp := b.resolve(ref)
			desc := resp.str("description")
			if d := ref.str("description"); d != "" {
				desc = d // OpenAPI 3.1: a description beside a $ref overrides
			}
			rv := responseView{Status: r.key, Description: markdown(desc), Media: b.media(resp.obj("content"), false)}
			for _, h := range resp.obj("headers") {
				hd := b.resolve(asObject(h.val))
				rv.Headers = append(rv.Headers, fieldView{Name: h.key, Required: hd.get("required") == true,
					Type: b.typeOf(hd.obj("schema")), Description: markdown(hd.str("description"))})
			}
			v.Responses = append(v.Responses, rv)
		}
		for _, cb := range op.obj("callbacks") {
			for _, expr := range b.resolve(asObject(cb.val)) {
				cv := callbackView{Name: cb.key, Expression: expr.key}
				for _, o := range b.operations(expr.key, asObject(expr.val)) {
					cv.Operations = append(cv.Operations, o.view)
				}
				v.Callbacks = append(v.Callbacks, cv)
			}
		}
		tag := ""
		if tags := op.arr("tags"); len(tags) > 0 {
			tag, _ = tags[0].(string)
		}
		out = append(out, taggedOperation{tag, v})
	}
	return out
}

func (b builder) servers(list []any) []serverView {
	var out []serverView
	for _, s := range list {
		o := asObject(s)
		sv := serverView{URL: o.str("url"), Description: markdown(o.str("description"))}
		var defaults []string
		for _, v := range o.obj("variables") {
			defaults = append(defaults, v.key+" = "+asObject(v.val).str("default"))
		}
		sv.Default = strings.Join(defaults, ", ")
		out = append(out, sv)
	}
	return out
}

// media lists a content map; withFields shows the schema's fields inline
// (request bodies), otherwise a link to the schema is enough.
func (b builder) media(content object, withFields bool) []mediaView {
	var out []mediaView
	for _, c := range content {
		mt := asObject(c.val)
		schema := mt.obj("schema")
		mv := mediaView{Type: c.key, Schema: b.typeOf(schema)}
		if withFields {
			mv.Fields = b.fields(b.resolve(schema), "")
		}
		form := strings.HasPrefix(c.key, "application/x-www-form-urlencoded")
		if mt.has("example") {
			mv.Examples = append(mv.Examples, exampleView{Text: exampleText(mt.get("example"), form)})
		}
		for _, e := range mt.obj("examples") {
			ex := b.resolve(asObject(e.val))
			name := ex.str("summary")
			if name == "" {
				name = e.key
			}
			mv.Examples = append(mv.Examples, exampleView{Name: name, Text: exampleText(ex.get("value"), form)})
		}
		out = append(out, mv)
	}
	return out
}

// exampleText shows a form example the way it travels, url-encoded, one
// field a line.
func exampleText(v any, form bool) string {
	o, ok := v.(object)
	if !form || !ok {
		return pretty(v)
	}
	var lines []string
	for _, m := range o {
		lines = append(lines, url.QueryEscape(m.key)+"="+url.QueryEscape(fmt.Sprint(m.val)))
	}
	return strings.Join(lines, "\n&")
}

// fields flattens an object schema's properties, inline objects as
// dotted names.
func (b builder) fields(s object, prefix string) []fieldView {
	required := map[string]bool{}
	for _, r := range s.arr("required") {
		if name, ok := r.(string); ok {
			required[name] = true
		}
	}
	var out []fieldView
	for _, p := range s.obj("properties") {
		ps := asObject(p.val)
		out = append(out, fieldView{Name: prefix + p.key, Required: required[p.key], Type: b.typeOf(ps), Description: markdown(ps.str("description"))})
		if !ps.has("$ref") && ps.has("properties") {
			out = append(out, b.fields(ps, prefix+p.key+".")...)
		}
	}
	return out
}

// typeOf describes a schema in a line: its type (a link for a named
// schema) and its constraints.
func (b builder) typeOf(s object) template.HTML {
	if s == nil {
		return ""
	}
	if ref := s.str("$ref"); ref != "" {
		name := ref[strings.LastIndex(ref, "/")+1:]
		return template.HTML(`<a href="#schema-` + html.EscapeString(anchor(name)) + `">` + html.EscapeString(name) + `</a>`)
	}
	var out string
	switch t := s.get("type").(type) {
	case string:
		out = html.EscapeString(t)
	case []any:
		var ts []string
		for _, x := range t {
			ts = append(ts, fmt.Sprint(x))
		}
		out = html.EscapeString(strings.Join(ts, " or "))
	}
	if items := s.obj("items"); items != nil {
		out = "array of " + string(b.typeOf(items))
	}
	var notes []string
	if s.has("format") {
		notes = append(notes, html.EscapeString(s.str("format")))
	}
	if c, ok := lookup(s, "const"); ok {
		notes = append(notes, "always "+code(c))
	}
	if e := s.arr("enum"); e != nil {
		var vals []string
		for _, x := range e {
			vals = append(vals, code(x))
		}
		notes = append(notes, "one of "+strings.Join(vals, ", "))
	}
	for _, k := range []struct{ key, say string }{{"minLength", "at least %s characters"}, {"maxLength", "at most %s characters"},
		{"minimum", "≥ %s"}, {"maximum", "≤ %s"}, {"default", "default %s"}} {
		if x, ok := lookup(s, k.key); ok {
			notes = append(notes, fmt.Sprintf(k.say, html.EscapeString(fmt.Sprint(x))))
		}
	}
	if s.has("pattern") {
		notes = append(notes, "matches "+code(s.str("pattern")))
	}
	if s.get("additionalProperties") == false {
		notes = append(notes, "no other fields")
	}
	if len(notes) > 0 {
		out += ` <span class="constraints">` + strings.Join(notes, "; ") + `</span>`
	}
	return template.HTML(out)
}

func lookup(o object, key string) (any, bool) {
	for _, m := range o {
		if m.key == key {
			return m.val, true
		}
	}
	return nil, false
}

func code(v any) string {
	text, ok := v.(string)
	if ok {
		raw, _ := json.Marshal(text)
		text = string(raw)
	} else {
		text = fmt.Sprint(v)
		if v == nil {
			text = "null"
		}
	}
	return "<code>" + html.EscapeString(text) + "</code>"
}

// resolve follows a local $ref (#/components/…) to what it names.
func (b builder) resolve(o object) object {
	for range 8 { // a chain of refs, never a loop
		ref := o.str("$ref")
		if !strings.HasPrefix(ref, "#/") {
			return o
		}
		var cur any = b.doc
		for _, part := range strings.Split(ref[2:], "/") {
			part = strings.ReplaceAll(strings.ReplaceAll(part, "~1", "/"), "~0", "~")
			cur = asObject(cur).get(part)
		}
		o = asObject(cur)
	}
	return o
}

func asObject(v any) object { o, _ := v.(object); return o }

// anchor makes an HTML id from a name.
func anchor(s string) string {
	var b strings.Builder
	for _, r := range s {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '_':
			b.WriteRune(r)
		default:
			b.WriteByte('-')
		}
	}
	return b.String()
}
