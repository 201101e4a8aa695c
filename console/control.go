package console

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/orchd/orchd/steering"
)

// Controls on a delegation, posted by the tree page's forms. Without
// JavaScript a form post is answered 303 back to the tree page, which
// shows the outcome carried in the redirect's query, signed so that the
// page shows no text a link from elsewhere put there; the script posts
// with Accept: application/json and shows the answer in place.

// controlAnswer is a control's outcome as the script reads it.
type controlAnswer struct {
	// Action is steer, interrupt, cancel or input.
	Action string `json:"action"`
	// Receipt is a steer's or an interrupt's receipt.
	Receipt *steering.Receipt `json:"receipt,omitempty"`
	// State is the delegation's state after a cancel or an input.
	State string `json:"state,omitempty"`
	// Error says why the control was refused.
	Error string `json:"error,omitempty"`
	// Code is the refusal's code, as the API names it.
	Code string `json:"code,omitempty"`
}

// flash is a control's outcome shown on the tree page after a redirect.
type flash struct {
	Action string
	// Hops is the receipt's hops, as "agent #seq", for steers and
	// interrupts.
	Hops []string
	// State is the delegation's state after a cancel or an input.
	State string
	// Error says why the control was refused.
	Error string
}

func (c *Console) control(w http.ResponseWriter, r *http.Request) {
	if !c.readForm(w, r) {
		return
	}
	ctx, id, action := r.Context(), r.PathValue("id"), r.PathValue("action")
	text := strings.TrimSpace(r.PostFormValue("text"))
	ans := controlAnswer{Action: action}
	var err error
	switch action {
	case "steer", "interrupt":
		if action == "steer" && text == "" {
			err = errEmptySteer
			break
		}
		var rc steering.Receipt
		if rc, err = c.cfg.Source.Steer(ctx, id, steering.Control(action), text); err == nil {
			ans.Receipt = &rc
		}
	case "cancel":
		rec, cerr := c.cfg.Source.Cancel(ctx, id)
		ans.State, err = string(rec.State), cerr
	case "input":
		if text == "" {
			err = errEmptyInput
			break
		}
		rec, serr := c.cfg.Source.Send(ctx, id, text)
		ans.State, err = string(rec.State), serr
	default:
		c.fail(w, r, http.StatusNotFound, "no such control: "+action+" (steer, interrupt, cancel or input)")
		return
	}
	status := http.StatusOK
	if err != nil {
		status, ans.Code = http.StatusBadRequest, "invalid_argument"
		if !errors.Is(err, errEmptySteer) && !errors.Is(err, errEmptyInput) {
			status, ans.Code = c.cfg.Classify(err)
		}
		ans.Error = err.Error()
		if status == http.StatusNotFound || status == http.StatusForbidden || status == http.StatusUnauthorized {
			if wantsJSON(r) {
				writeJSON(w, status, ans)
			} else {
				c.failErr(w, r, err)
			}
			return
		}
	}
	if wantsJSON(r) {
		writeJSON(w, status, ans)
		return
	}
	http.Redirect(w, r, "/ui/delegations/"+url.PathEscape(id)+"?"+c.flashQuery(id, ans).Encode()+"#outcome", http.StatusSeeOther)
}

var (
	errEmptySteer = errors.New("a steer needs text")
	errEmptyInput = errors.New("an answer needs text")
)

// flashQuery is the outcome as the redirect to delegation id's tree page
// carries it, signed (flashSig).
func (c *Console) flashQuery(id string, a controlAnswer) url.Values {
	q := url.Values{"done": {a.Action}}
	if a.Receipt != nil {
		for _, h := range a.Receipt.Hops {
			q.Add("hop", h.Agent+" #"+strconv.FormatInt(h.Seq, 10))
		}
	}
	if a.State != "" {
		q.Set("state", a.State)
	}
	if a.Error != "" {
		q.Set("error", a.Error)
	}
	q.Set("sig", c.flashSig(id, q))
	return q
}

// flashSig signs an outcome for delegation id's tree page: an HMAC of the
// page's id and the query without its "sig", under a key the console
// drew at start. A link from elsewhere cannot carry a valid one, so its
// text is never shown as an outcome; nor can an outcome be moved to
// another delegation's page.
func (c *Console) flashSig(id string, q url.Values) string {
	signed := url.Values{}
	for k, v := range q {
		if k != "sig" {
			signed[k] = v
		}
	}
	mac := hmac.New(sha256.New, c.flashKey)
	mac.Write([]byte(id + "?" + signed.Encode())) // Encode sorts by key: one text per outcome
	return base64.RawURLEncoding.EncodeToString(mac.Sum(nil))
}

// flashFrom reads a control's outcome from delegation id's tree page's
// query; nil when there is none, or when the console did not sign it
// (flashSig). It only shows what the redirect carried; the receipts
// themselves are in the events below it.
func (c *Console) flashFrom(id string, q url.Values) *flash {
	sig, err := base64.RawURLEncoding.DecodeString(q.Get("sig"))
	if err != nil || len(sig) == 0 {
		return nil
	}
	if want, _ := base64.RawURLEncoding.DecodeString(c.flashSig(id, q)); !hmac.Equal(sig, want) {
		return nil
	}
	a := q.Get("done")
	switch a {
	case "steer", "interrupt", "cancel", "input":
	default:
		return nil
	}
	hops := q["hop"]
	if len(hops) > 16 {
		hops = hops[:16]
	}
	return &flash{Action: a, Hops: hops, State: q.Get("state"), Error: q.Get("error")}
}

// wantsJSON reports whether the script, not a plain form, posted r.
func wantsJSON(r *http.Request) bool {
	return strings.Contains(r.Header.Get("Accept"), "application/json")
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
