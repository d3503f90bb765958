package servertest

import (
	"html"
	"net/http"
	"regexp"
	"strings"
)

// Page is what a browser would find in one of the hosted pages: its forms
// and their inputs. The pages come from html/template, which always quotes
// attribute values with double quotes, so a small scanner reads them
// without an HTML parser dependency.
type Page struct {
	Forms []Form
}

// Form is one <form> and the inputs inside it.
type Form struct {
	Attrs  map[string]string
	Inputs []Input
}

// Input is one <input>.
type Input struct {
	Attrs map[string]string
}

// Field is a name and value as the browser would submit them.
type Field struct{ Name, Value string }

var (
	formRE  = regexp.MustCompile(`(?is)<form\b([^>]*)>(.*?)</form>`)
	inputRE = regexp.MustCompile(`(?is)<input\b([^>]*)>`)
	attrRE  = regexp.MustCompile(`([A-Za-z_:][-A-Za-z0-9_:.]*)(?:\s*=\s*"([^"]*)")?`)
)

// ParsePage reads the forms of body.
func ParsePage(body string) Page {
	var p Page
	for _, m := range formRE.FindAllStringSubmatch(body, -1) {
		f := Form{Attrs: attrs(m[1])}
		for _, in := range inputRE.FindAllStringSubmatch(m[2], -1) {
			f.Inputs = append(f.Inputs, Input{Attrs: attrs(in[1])})
		}
		p.Forms = append(p.Forms, f)
	}
	return p
}

func attrs(s string) map[string]string {
	out := map[string]string{}
	for _, m := range attrRE.FindAllStringSubmatch(s, -1) {
		out[strings.ToLower(m[1])] = html.UnescapeString(m[2])
	}
	return out
}

// Redirect returns the form that posts the result back to the merchant.
func (p Page) Redirect() (Form, bool) {
	for _, f := range p.Forms {
		if f.Attrs["id"] == "kadi-callback" {
			return f, true
		}
	}
	return Form{}, false
}

// Action is where the form posts.
func (f Form) Action() string { return f.Attrs["action"] }

// Hidden lists the hidden inputs in page order, duplicates included.
func (f Form) Hidden() []Field {
	var out []Field
	for _, in := range f.Inputs {
		if strings.EqualFold(in.Attrs["type"], "hidden") {
			out = append(out, Field{in.Attrs["name"], in.Attrs["value"]})
		}
	}
	return out
}

// Values maps the hidden inputs' names to their values.
func (f Form) Values() map[string]string {
	out := map[string]string{}
	for _, h := range f.Hidden() {
		out[h.Name] = h.Value
	}
	return out
}

// Input returns the input named name.
func (f Form) Input(name string) (Input, bool) {
	for _, in := range f.Inputs {
		if in.Attrs["name"] == name {
			return in, true
		}
	}
	return Input{}, false
}

// CSP splits a Content-Security-Policy header into its directives.
func CSP(h http.Header) map[string][]string {
	out := map[string][]string{}
	for _, d := range strings.Split(h.Get("Content-Security-Policy"), ";") {
		parts := strings.Fields(d)
		if len(parts) > 0 {
			out[strings.ToLower(parts[0])] = parts[1:]
		}
	}
	return out
}

// FormTo returns the page's form that posts to action.
func (p Page) FormTo(action string) (Form, bool) {
	for _, f := range p.Forms {
		if f.Action() == action {
			return f, true
		}
	}
	return Form{}, false
}
