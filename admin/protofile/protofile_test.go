package protofile

import (
	"encoding/base64"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// The proto of APISIX's t/admin/protos.t.
const helloworld = `syntax = "proto3";
package helloworld;
service Greeter {
    rpc SayHello (HelloRequest) returns (HelloReply) {}
}
message HelloRequest {
    string name = 1;
}
message HelloReply {
    string message = 1;
}`

func TestCheckText(t *testing.T) {
	for _, ok := range []string{
		helloworld,
		`syntax = "proto3"; import "google/protobuf/timestamp.proto"; message M { google.protobuf.Timestamp at = 1; }`,
		`syntax = "proto2"; package p; message M { optional int32 a = 1; }`,
	} {
		if err := Check(ok); err != nil {
			t.Errorf("Check(%q): %v", ok, err)
		}
	}
	for _, tc := range []struct{ in, want string }{
		{`syntax = "proto3"; message M { string a = 1`, "proto:1:"},
		{`not a proto`, "proto:1:1: syntax error"},
		{`syntax = "proto3"; message M { Missing a = 1; }`, "unknown type Missing"},
		{`syntax = "proto3"; import "other.proto"; message M {}`, "other.proto"},
		{`syntax = "proto3"; message M { string a = 1; string b = 1; }`, "1"},
	} {
		err := Check(tc.in)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Check(%q) = %v, want an error with %q", tc.in, err, tc.want)
		}
		if err != nil && strings.HasPrefix(err.Error(), "proto: ") {
			t.Errorf("Check(%q) = %q: the file name is not a prefix", tc.in, err)
		}
	}
}

// A descriptor set (protoc --descriptor_set_out) in base64 is APISIX's
// other form.
func TestCheckDescriptorSet(t *testing.T) {
	fd := protodesc.ToFileDescriptorProto(timestamppb.File_google_protobuf_timestamp_proto)
	b, err := proto.Marshal(&descriptorpb.FileDescriptorSet{File: []*descriptorpb.FileDescriptorProto{fd}})
	if err != nil {
		t.Fatal(err)
	}
	if err := Check(base64.StdEncoding.EncodeToString(b)); err != nil {
		t.Errorf("descriptor set: %v", err)
	}
	// A file whose import is not in the set does not link.
	dep := &descriptorpb.FileDescriptorProto{Name: proto.String("a.proto"), Dependency: []string{"missing.proto"}}
	b, _ = proto.Marshal(&descriptorpb.FileDescriptorSet{File: []*descriptorpb.FileDescriptorProto{dep}})
	if err := Check(base64.StdEncoding.EncodeToString(b)); err == nil {
		t.Error("a descriptor set that does not link passed")
	}
	// Base64 of no descriptor set is the text's error.
	if err := Check(base64.StdEncoding.EncodeToString([]byte("hello"))); err == nil {
		t.Error("base64 of no descriptor set passed")
	}
}
