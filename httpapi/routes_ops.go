package httpapi

import (
	"github.com/commonroom/ce/httpapi/present"
	"net/http"
	"net/url"
	"reflect"
	"strconv"
	"strings"

	"github.com/go-chi/chi/v5"

	"github.com/commonroom/ce/httpapi/ops"
	"github.com/commonroom/ce/room"
)

// The plain HTTP routes of the operations table: each row with a Call is
// one route that decodes the query (GET) or the body (POST) into the row's
// input struct and answers what the engine method returns.

// mountOps registers a route for every operation of the table that is one
// engine call; the rest are wired by hand in routes.
func (s *Server) mountOps(r chi.Router) {
	for _, op := range ops.Table {
		if op.Call.Routed() {
			r.Method(op.Method(), op.Path(), s.serveOp(op))
		}
	}
}

// opEnv is what an operation runs against.
func (s *Server) opEnv() ops.Env { return ops.Env{Room: s.room, Log: s.log, Records: &s.records} }

func (s *Server) serveOp(op ops.Op) http.HandlerFunc {
	// An operation without arguments reads no body (POST /workspace/leave
	// never did).
	noArgs := op.Call.Input() == reflect.TypeFor[room.Empty]()
	return func(w http.ResponseWriter, r *http.Request) {
		decode := func(v any) error { return decodeQuery(r.URL.Query(), v) }
		if r.Method == http.MethodPost {
			decode = func(v any) error {
				if noArgs {
					return nil
				}
				return s.decodeJSON(w, r, v)
			}
		}
		out, err := op.Run(r.Context(), s.opEnv(), principalOf(r), decode)
		if err != nil {
			s.sendError(w, r, err)
			return
		}
		out = present.PresentResult(out)
		if op.Bare != nil {
			out = op.Bare(out)
		}
		sendJSON(w, http.StatusOK, out)
	}
}

// decodeQuery reads query parameters into an input struct, one per field
// under its json name (or a query tag's name, for a parameter only plain
// HTTP has). Absent parameters leave the zero value, unless the query tag
// says ",required": GET routes refuse those before the engine, where absent
// and zero differ (base_version, version). Integers that do not parse are
// invalid_request naming the parameter; unknown parameters are ignored.
func decodeQuery(q url.Values, v any) error {
	rv := reflect.ValueOf(v).Elem()
	for _, f := range reflect.VisibleFields(rv.Type()) {
		name, required := queryName(f)
		if name == "" {
			continue
		}
		raw := q.Get(name)
		if raw == "" {
			if required {
				return room.Errorf(room.KindInvalidRequest, "%s is required", name).With("field", name)
			}
			continue
		}
		fv := rv.FieldByIndex(f.Index)
		if fv.Kind() == reflect.String {
			fv.SetString(raw)
			continue
		}
		n, err := strconv.ParseInt(raw, 10, 64)
		if err != nil {
			return room.Errorf(room.KindInvalidRequest, "%s must be an integer", name).With("field", name)
		}
		switch {
		case fv.Kind() == reflect.Int || fv.Kind() == reflect.Int64:
			fv.SetInt(n)
		case fv.Type() == reflect.TypeFor[*int64]():
			fv.Set(reflect.ValueOf(&n))
		default:
			return room.Internal(&queryTypeError{name, fv.Type()})
		}
	}
	return nil
}

// queryName is a field's query parameter name and whether a GET route
// requires it; "" for a field that is not a parameter.
func queryName(f reflect.StructField) (name string, required bool) {
	if !f.IsExported() {
		return "", false
	}
	tag, opts, _ := strings.Cut(f.Tag.Get("query"), ",")
	required = opts == "required"
	if tag != "" {
		return tag, required
	}
	json, _, _ := strings.Cut(f.Tag.Get("json"), ",")
	if json == "-" || json == "" {
		return "", false
	}
	return json, required
}

// queryTypeError is an input field a query cannot fill: a programming
// error the route tests catch.
type queryTypeError struct {
	name string
	typ  reflect.Type
}

func (e *queryTypeError) Error() string {
	return "query parameter " + e.name + " cannot fill a " + e.typ.String()
}
