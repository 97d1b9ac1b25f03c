//go:build ignore

// client is scripts/e2e-parca.sh's client of Parca's QueryService, built
// inside Parca's own module (its generated API and its go.sum), never part
// of memtrace's: the HTTP gateway of Parca v0.21 answers 404 under /api, so
// the script asks over gRPC. It prints each answer as protojson.
//
//	client ADDR types
//	client ADDR range QUERY START END STEP   (RFC 3339 times, Go duration)
//	client ADDR top QUERY TIME
package main

import (
	"context"
	"fmt"
	"os"
	"time"

	querypb "github.com/parca-dev/parca/gen/proto/go/parca/query/v1alpha1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "e2e-parca client:", err)
		os.Exit(1)
	}
}

func ts(s string) (*timestamppb.Timestamp, error) {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return nil, fmt.Errorf("time %q: %w", s, err)
	}
	return timestamppb.New(t), nil
}

func run(args []string) error {
	if len(args) < 2 {
		return fmt.Errorf("usage: client ADDR types|range|top ...")
	}
	conn, err := grpc.Dial(args[0], grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer conn.Close()
	c := querypb.NewQueryServiceClient(conn)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var res proto.Message
	switch {
	case args[1] == "types":
		res, err = c.ProfileTypes(ctx, &querypb.ProfileTypesRequest{})
	case args[1] == "range" && len(args) == 6:
		start, err1 := ts(args[3])
		end, err2 := ts(args[4])
		step, err3 := time.ParseDuration(args[5])
		if err1 != nil || err2 != nil || err3 != nil {
			return fmt.Errorf("range: %v %v %v", err1, err2, err3)
		}
		res, err = c.QueryRange(ctx, &querypb.QueryRangeRequest{Query: args[2], Start: start, End: end, Step: durationpb.New(step)})
	case args[1] == "top" && len(args) == 4:
		t, err1 := ts(args[3])
		if err1 != nil {
			return err1
		}
		res, err = c.Query(ctx, &querypb.QueryRequest{Mode: querypb.QueryRequest_MODE_SINGLE_UNSPECIFIED,
			Options:    &querypb.QueryRequest_Single{Single: &querypb.SingleProfile{Query: args[2], Time: t}},
			ReportType: querypb.QueryRequest_REPORT_TYPE_TOP})
	default:
		return fmt.Errorf("unknown request %q", args[1:])
	}
	if err != nil {
		return err
	}
	b, err := protojson.Marshal(res)
	if err != nil {
		return err
	}
	fmt.Println(string(b))
	return nil
}
