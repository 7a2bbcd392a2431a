// Package hostpb holds the host program's own messages of examples/cluster.
package hostpb

//go:generate protoc --go_out=. --go_opt=paths=source_relative host.proto
