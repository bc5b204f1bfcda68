// Package protofile checks the content of a proto object
// (/apisix/admin/protos, apisix.yaml's protos) as APISIX's
// grpc-transcode compiles it before storing it: the text of one .proto
// file, which may import Google's well-known types
// (google/protobuf/*.proto) and nothing else, or, failing that, a
// base64-encoded google.protobuf.FileDescriptorSet (protoc
// --descriptor_set_out), whose files must link together.
//
// The text is parsed and linked by github.com/bufbuild/protocompile, the
// descriptor set by google.golang.org/protobuf; nothing is kept. Check is
// safe for concurrent use.
package protofile

import (
	"context"
	"encoding/base64"
	"errors"
	"strings"

	"github.com/bufbuild/protocompile"
	"github.com/bufbuild/protocompile/reporter"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/types/descriptorpb"
)

// fileName is the name the content is compiled under; it begins the
// positions of the errors ("proto:3:1: syntax error: ...").
const fileName = "proto"

// Check compiles content. Its error is the text's (as APISIX reports the
// text's when neither form loads), without the package's prefix: the
// Admin API puts it after "invalid content: ".
func Check(content string) error {
	err := compileText(content)
	if err == nil {
		return nil
	}
	if descriptorSet(content) {
		return nil
	}
	return err
}

func compileText(content string) error {
	c := protocompile.Compiler{
		Resolver: protocompile.WithStandardImports(&protocompile.SourceResolver{
			Accessor: protocompile.SourceAccessorFromMap(map[string]string{fileName: content}),
		}),
		// The first error only: it is the message.
		Reporter: reporter.NewReporter(nil, nil),
	}
	_, err := c.Compile(context.Background(), fileName)
	if err == nil {
		return nil
	}
	var ep reporter.ErrorWithPos
	if errors.As(err, &ep) {
		return ep
	}
	return errors.New(strings.TrimPrefix(err.Error(), fileName+": "))
}

// descriptorSet reports whether content is a base64-encoded
// FileDescriptorSet with at least one file, whose files link.
func descriptorSet(content string) bool {
	b, err := base64.StdEncoding.DecodeString(strings.TrimSpace(content))
	if err != nil || len(b) == 0 {
		return false
	}
	var set descriptorpb.FileDescriptorSet
	if err := proto.Unmarshal(b, &set); err != nil || len(set.File) == 0 {
		return false
	}
	_, err = protodesc.NewFiles(&set)
	return err == nil
}
