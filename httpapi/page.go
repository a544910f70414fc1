package httpapi

import (
	"html/template"
	"net/http"

	"github.com/commonroom/ce/actor"
	"github.com/commonroom/ce/room"
)

var pageTmpl = template.Must(template.New("page").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>{{.Status.Name}} · Commonroom</title></head>
<body><main>
<h1>{{.Status.Name}}</h1>
<p>Version {{.Status.Version}} · {{.Status.Participants}} participants · {{.Status.PendingProposals}} pending proposals</p>
<h2>Participants</h2>
<ul>{{range .Participants}}<li>{{.Kind}}: {{.Name}}</li>{{end}}</ul>
<h2>Outline</h2>
<ul>{{range .Status.HeadingTree}}<li>{{.Path}}</li>{{end}}</ul>
</main></body></html>
`))

// servePage renders the owner's view of the room.
func (s *Server) servePage(w http.ResponseWriter, r *http.Request) {
	p := room.Operator(s.eng.HostID)
	type view struct {
		Status       room.Status
		Participants []room.Participant
	}
	v, err := actor.Read(r.Context(), s.room, func(q room.Querier) (view, error) {
		st, err := s.eng.Status(r.Context(), q, p)
		if err != nil {
			return view{}, err
		}
		ps, err := s.eng.Participants(r.Context(), q, p)
		return view{Status: st, Participants: ps}, err
	})
	if err != nil {
		s.sendError(w, r, err)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Content-Security-Policy", "default-src 'self'; frame-ancestors 'none'")
	w.Header().Set("X-Frame-Options", "DENY")
	pageTmpl.Execute(w, v)
}
