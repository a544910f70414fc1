package rpc

import (
	"bytes"
	"encoding/json"
	"net/http"

	"github.com/commonroom/ce/httpapi/internal/wirejson"
)

// rpcErrorBody is the wire form of a JSON-RPC error response.
type rpcErrorBody struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id,omitempty"`
	Error   rpcErrorObject  `json:"error"`
}

type rpcErrorObject struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
	Data    any    `json:"data,omitempty"`
}

// WriteError sends e with status e.Status as application/json. id is echoed
// as given; a nil id leaves the member out (never null).
func WriteError(w http.ResponseWriter, id json.RawMessage, e *Error) {
	body := rpcErrorBody{JSONRPC: "2.0", ID: id, Error: rpcErrorObject{Code: e.Code, Message: wirejson.Clip(e.Message, wirejson.MaxErrorString), Data: wirejson.BoundStrings(e.Data)}}
	b, err := MarshalJSON(body)
	if err != nil && e.Data != nil { // data that cannot be encoded is dropped
		body.Error.Data = nil
		b, err = MarshalJSON(body)
	}
	if err != nil { // only an id that is not JSON gets here
		body.ID = nil
		b, _ = MarshalJSON(body)
	}
	writeJSON(w, e.Status, b)
}

// WriteResult sends {"jsonrpc":"2.0","id":id,"result":result} as
// application/json with status 200. A result that cannot be encoded becomes a
// -32603 error (also 200: a JSON-RPC-level error, spec §1.5).
// The result is encoded straight into the response (no copy of a large
// result is held while it is sent); the bytes are MarshalJSON's.
func WriteResult(w http.ResponseWriter, id json.RawMessage, result any) {
	w.Header().Set("Content-Type", "application/json")
	if f, ok := result.(*Frame); ok {
		// StatusOnWrite's one write, without one on the heap.
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write(f.b)
		f.release()
		return
	}
	out := &wirejson.StatusOnWrite{W: w, Status: http.StatusOK}
	if raw, ok := result.(Raw); ok {
		if sent, _ := writeRawResult(out, id, raw); sent {
			return
		}
		result = json.RawMessage(raw)
	}
	enc := json.NewEncoder(out)
	enc.SetEscapeHTML(false)
	err := enc.Encode(struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id,omitempty"`
		Result  any             `json:"result"`
	}{"2.0", id, result})
	if err != nil && !out.Wrote {
		WriteError(w, id, &Error{Status: http.StatusOK, Code: CodeInternalError, Message: "internal error: the result could not be encoded"})
	}
}

// MarshalJSON encodes v without HTML escaping, so that ids and strings go back
// byte for byte as they came.
func MarshalJSON(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func writeJSON(w http.ResponseWriter, status int, body []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(body)
}
