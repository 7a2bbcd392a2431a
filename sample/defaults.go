package sample

import "log/slog"

// Fields is a set of the sampling parameters a model's generation config
// can recommend: the ones a request set itself, or the ones a model gives
// defaults for.
type Fields uint8

// The parameters of Fields.
const (
	FieldTemperature Fields = 1 << iota
	FieldTopP
	FieldTopK
	FieldMinP
	FieldRepetitionPenalty

	// AllFields is every parameter: a request that sets it keeps its
	// Params exactly as they are.
	AllFields = FieldTemperature | FieldTopP | FieldTopK | FieldMinP | FieldRepetitionPenalty
)

// Defaults are a model's recommended sampling parameters, from its
// generation_config.json; a nil field is one the model does not
// recommend. The JSON names are those of the file (and of the OpenAI API's
// vLLM extensions). A Defaults is read-only once loaded: requests share it.
type Defaults struct {
	Temperature       *float64 `json:"temperature,omitempty"`
	TopP              *float64 `json:"top_p,omitempty"`
	TopK              *int     `json:"top_k,omitempty"` // -1 and 0 keep every token
	MinP              *float64 `json:"min_p,omitempty"`
	RepetitionPenalty *float64 `json:"repetition_penalty,omitempty"`
}

// Fields reports which parameters d recommends.
func (d Defaults) Fields() Fields {
	var f Fields
	for _, x := range []struct {
		set bool
		f   Fields
	}{
		{d.Temperature != nil, FieldTemperature}, {d.TopP != nil, FieldTopP}, {d.TopK != nil, FieldTopK},
		{d.MinP != nil, FieldMinP}, {d.RepetitionPenalty != nil, FieldRepetitionPenalty},
	} {
		if x.set {
			f |= x.f
		}
	}
	return f
}

// Apply returns p with each parameter that d recommends and set lacks taken
// from d. The parameters a request set itself (set) always win, an
// explicit temperature 0 (greedy) included, as in vLLM, where a model's
// generation config only replaces the server's own defaults.
func (d Defaults) Apply(p Params, set Fields) Params {
	use := d.Fields() &^ set
	if use&FieldTemperature != 0 {
		p.Temperature = float32(*d.Temperature)
	}
	if use&FieldTopP != 0 {
		p.TopP = float32(*d.TopP)
	}
	if use&FieldTopK != 0 {
		p.TopK = max(*d.TopK, 0)
	}
	if use&FieldMinP != 0 {
		p.MinP = float32(*d.MinP)
	}
	if use&FieldRepetitionPenalty != 0 {
		p.RepetitionPenalty = float32(*d.RepetitionPenalty)
	}
	return p
}

// LogValue logs the recommended parameters by their JSON names (none: an
// empty group).
func (d Defaults) LogValue() slog.Value {
	var attrs []slog.Attr
	num := func(name string, v *float64) {
		if v != nil {
			attrs = append(attrs, slog.Float64(name, *v))
		}
	}
	num("temperature", d.Temperature)
	num("top_p", d.TopP)
	if d.TopK != nil {
		attrs = append(attrs, slog.Int("top_k", *d.TopK))
	}
	num("min_p", d.MinP)
	num("repetition_penalty", d.RepetitionPenalty)
	return slog.GroupValue(attrs...)
}
