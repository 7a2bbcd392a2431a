module github.com/troupe-ai/troupe

go 1.26
