module github.com/troupe-ai/troupe/tests

go 1.26.0

require (
	github.com/openai/openai-go v1.12.0
	github.com/troupe-ai/troupe v0.0.0
)

require (
	github.com/tidwall/gjson v1.14.4 // indirect
	github.com/tidwall/match v1.1.1 // indirect
	github.com/tidwall/pretty v1.2.1 // indirect
	github.com/tidwall/sjson v1.2.5 // indirect
)

replace github.com/troupe-ai/troupe => ../
