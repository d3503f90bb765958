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
	info := doc.Obj("info")
	p := &page{Title: info.Str("title"), Version: info.Str("version"), Summary: info.Str("summary"),
		Description: markdown(info.Str("description"))}
	p.Servers = b.servers(doc.Arr("servers"))
	for _, s := range doc.Obj("components").Obj("securitySchemes") {
		o, _ := s.Value.(object)
		p.Security = append(p.Security, securityView{Name: s.Key, Scheme: o.Str("type") + " " + o.Str("scheme"), Description: markdown(o.Str("description"))})
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
	for _, t := range doc.Arr("tags") {
		o, _ := t.(object)
		addTag(o.Str("name"))
		tagDescriptions[o.Str("name")] = o.Str("description")
	}
	for _, m := range doc.Obj("paths") {
		item, _ := m.Value.(object)
		for _, op := range b.operations(m.Key, item) {
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
	for _, m := range doc.Obj("webhooks") {
		item, _ := m.Value.(object)
		for _, op := range b.operations(m.Key, item) {
			op.view.Path = "your " + m.Key + " URL"
			op.view.ID = "webhook-" + anchor(m.Key) + "-" + strings.ToLower(op.view.Method)
			p.Webhooks = append(p.Webhooks, op.view)
		}
	}
	for _, m := range doc.Obj("components").Obj("schemas") {
		s, _ := m.Value.(object)
		p.Schemas = append(p.Schemas, schemaView{Name: m.Key, ID: "schema-" + anchor(m.Key), Description: markdown(s.Str("description")),
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
		op := item.Obj(method)
		if op == nil {
			continue
		}
		v := operationView{ID: "op-" + anchor(op.Str("operationId")), Method: strings.ToUpper(method), Path: path,
			Summary: op.Str("summary"), Description: markdown(op.Str("description"))}
		if v.ID == "op-" {
			v.ID = "op-" + method + anchor(path)
		}
		for _, s := range b.servers(item.Arr("servers")) {
			v.Servers = append(v.Servers, s.URL)
		}
		security := op.Arr("security")
		if security == nil {
			security = b.doc.Arr("security")
		}
		for _, req := range security {
			for _, m := range asObject(req) {
				v.Security = append(v.Security, m.Key)
			}
		}
		params := append(append([]any{}, item.Arr("parameters")...), op.Arr("parameters")...)
		for _, pr := range params {
			p := b.resolve(asObject(pr))
			v.Parameters = append(v.Parameters, fieldView{Name: p.Str("name"), In: p.Str("in"), Required: p.Get("required") == true,
				Type: b.typeOf(p.Obj("schema")), Description: markdown(p.Str("description"))})
		}
		if rb := b.resolve(op.Obj("requestBody")); rb != nil {
			v.Body = &bodyView{Required: rb.Get("required") == true, Media: b.media(rb.Obj("content"), true)}
		}
		for _, r := range op.Obj("responses") {
			ref := asObject(r.Value)
			resp := b.resolve(ref)
			desc := resp.Str("description")
			if d := ref.Str("description"); d != "" {
				desc = d // OpenAPI 3.1: a description beside a $ref overrides
			}
			rv := responseView{Status: r.Key, Description: markdown(desc), Media: b.media(resp.Obj("content"), false)}
			for _, h := range resp.Obj("headers") {
				hd := b.resolve(asObject(h.Value))
				rv.Headers = append(rv.Headers, fieldView{Name: h.Key, Required: hd.Get("required") == true,
					Type: b.typeOf(hd.Obj("schema")), Description: markdown(hd.Str("description"))})
			}
			v.Responses = append(v.Responses, rv)
		}
		for _, cb := range op.Obj("callbacks") {
			for _, expr := range b.resolve(asObject(cb.Value)) {
				cv := callbackView{Name: cb.Key, Expression: expr.Key}
				for _, o := range b.operations(expr.Key, asObject(expr.Value)) {
					cv.Operations = append(cv.Operations, o.view)
				}
				v.Callbacks = append(v.Callbacks, cv)
			}
		}
		tag := ""
		if tags := op.Arr("tags"); len(tags) > 0 {
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
		sv := serverView{URL: o.Str("url"), Description: markdown(o.Str("description"))}
		var defaults []string
		for _, v := range o.Obj("variables") {
			defaults = append(defaults, v.Key+" = "+asObject(v.Value).Str("default"))
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
		mt := asObject(c.Value)
		schema := mt.Obj("schema")
		mv := mediaView{Type: c.Key, Schema: b.typeOf(schema)}
		if withFields {
			mv.Fields = b.fields(b.resolve(schema), "")
		}
		form := strings.HasPrefix(c.Key, "application/x-www-form-urlencoded")
		if mt.Has("example") {
			mv.Examples = append(mv.Examples, exampleView{Text: exampleText(mt.Get("example"), form)})
		}
		for _, e := range mt.Obj("examples") {
			ex := b.resolve(asObject(e.Value))
			name := ex.Str("summary")
			if name == "" {
				name = e.Key
			}
			mv.Examples = append(mv.Examples, exampleView{Name: name, Text: exampleText(ex.Get("value"), form)})
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
		lines = append(lines, url.QueryEscape(m.Key)+"="+url.QueryEscape(fmt.Sprint(m.Value)))
	}
	return strings.Join(lines, "\n&")
}

// fields flattens an object schema's properties, inline objects as
// dotted names.
func (b builder) fields(s object, prefix string) []fieldView {
	required := map[string]bool{}
	for _, r := range s.Arr("required") {
		if name, ok := r.(string); ok {
			required[name] = true
		}
	}
	var out []fieldView
	for _, p := range s.Obj("properties") {
		ps := asObject(p.Value)
		out = append(out, fieldView{Name: prefix + p.Key, Required: required[p.Key], Type: b.typeOf(ps), Description: markdown(ps.Str("description"))})
		if !ps.Has("$ref") && ps.Has("properties") {
			out = append(out, b.fields(ps, prefix+p.Key+".")...)
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
	if ref := s.Str("$ref"); ref != "" {
		name := ref[strings.LastIndex(ref, "/")+1:]
		return template.HTML(`<a href="#schema-` + html.EscapeString(anchor(name)) + `">` + html.EscapeString(name) + `</a>`)
	}
	var out string
	switch t := s.Get("type").(type) {
	case string:
		out = html.EscapeString(t)
	case []any:
		var ts []string
		for _, x := range t {
			ts = append(ts, fmt.Sprint(x))
		}
		out = html.EscapeString(strings.Join(ts, " or "))
	}
	if items := s.Obj("items"); items != nil {
		out = "array of " + string(b.typeOf(items))
	}
	var notes []string
	if s.Has("format") {
		notes = append(notes, html.EscapeString(s.Str("format")))
	}
	if c, ok := lookup(s, "const"); ok {
		notes = append(notes, "always "+code(c))
	}
	if e := s.Arr("enum"); e != nil {
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
	if s.Has("pattern") {
		notes = append(notes, "matches "+code(s.Str("pattern")))
	}
	if s.Get("additionalProperties") == false {
		notes = append(notes, "no other fields")
	}
	if len(notes) > 0 {
		out += ` <span class="constraints">` + strings.Join(notes, "; ") + `</span>`
	}
	return template.HTML(out)
}

func lookup(o object, key string) (any, bool) {
	for _, m := range o {
		if m.Key == key {
			return m.Value, true
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
		ref := o.Str("$ref")
		if !strings.HasPrefix(ref, "#/") {
			return o
		}
		var cur any = b.doc
		for _, part := range strings.Split(ref[2:], "/") {
			part = strings.ReplaceAll(strings.ReplaceAll(part, "~1", "/"), "~0", "~")
			cur = asObject(cur).Get(part)
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
