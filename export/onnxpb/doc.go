// Package onnxpb is the Go binding of the ONNX protobuf schema
// (onnx.proto: ModelProto, GraphProto, NodeProto, TensorProto, …), which
// package export uses to write models as ONNX files.
//
// # How it was generated
//
// onnx.proto is copied unchanged from Debian 12's python3-onnx 1.12.0-2
// (/usr/lib/python3/dist-packages/onnx/onnx.proto, SHA-256
// a96f50c0fe1ff9180b6025843d4f7efcf53b024c83db55a36cd24a1e44345182), the
// schema of ONNX 1.12.0 (IR version 8, operator sets up to 17), which is
// generated upstream from onnx/onnx.in.proto at
// https://github.com/onnx/onnx/tree/v1.12.0/onnx. onnx.pb.go was
// generated from it with protoc 3.21.12 (Debian's protobuf-compiler
// 3.21.12-3+deb12u1) and protoc-gen-go v1.36.12
// (go install google.golang.org/protobuf/cmd/protoc-gen-go@v1.36.12), by
// the go:generate line below, run in this directory:
//
//	protoc --go_out=. --go_opt=paths=source_relative \
//	    --go_opt=Monnx.proto=github.com/dpfl/dpfl/export/onnxpb onnx.proto
//
// The M option gives the schema a Go import path, which onnx.proto itself
// does not declare; nothing else is changed. The generated code needs
// google.golang.org/protobuf v1.36.12 or later at run time.
//
// # License and attribution
//
// onnx.proto is part of ONNX, Copyright (c) ONNX Project Contributors
// (earlier copyright Facebook, Inc. and Microsoft Corporation), licensed
// under the Apache License, Version 2.0 (its header carries
// SPDX-License-Identifier: Apache-2.0); LICENSE in this directory is the
// license's text. onnx.pb.go, generated from it, is under the same
// license.
package onnxpb

//go:generate protoc --go_out=. --go_opt=paths=source_relative --go_opt=Monnx.proto=github.com/dpfl/dpfl/export/onnxpb onnx.proto
