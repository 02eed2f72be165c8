// Command cron judges cron expressions with the parsers the schedulers use, so that tests judge tfxd's
// schedules with code that is not tfxd's:
//
//	cron kfp     github.com/robfig/cron v1.2.0's cron.Parse, the call Kubeflow Pipelines' API server makes
//	             on a recurring run (backend/src/apiserver/server/api_converter.go, toModelJob: "Schedule
//	             cron is not a supported format(https://godoc.org/github.com/robfig/cron). Error: %v") and its
//	             ScheduledWorkflow controller makes again on each tick
//	             (backend/src/crd/controller/scheduledworkflow/util/cron_schedule.go)
//	cron vertex  github.com/robfig/cron/v3 v3.0.1's cron.ParseStandard: five fields with an optional
//	             "TZ=<zone> " or "CRON_TZ=<zone> " prefix, the form Vertex AI's Schedule.cron documents.
//	             Vertex's own parser is not public; this is the parser that prefix syntax comes from.
//
// It reads one cron per line of stdin, each a JSON string (so a cron may hold any character), and writes
// one JSON object per line, in order: {"cron": ..., "error": null} when the parser takes it, else the
// parser's error as it words it. One process judges a whole batch: the tests' fake servers call it once
// per batch of unseen crons and keep the answers.
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	_ "time/tzdata" // zones as Go ships them, not as the machine has them

	cronv1 "github.com/robfig/cron"
	cronv3 "github.com/robfig/cron/v3"
)

type verdict struct {
	Cron  string  `json:"cron"`
	Error *string `json:"error"`
}

var parsers = map[string]func(string) error{
	"kfp":    func(spec string) error { _, err := cronv1.Parse(spec); return err },
	"vertex": func(spec string) error { _, err := cronv3.ParseStandard(spec); return err },
}

// judge runs parse on spec; a panic (v3 slices past the end of "TZ=UTC" with no fields) is a refusal too.
func judge(parse func(string) error, spec string) (problem *string) {
	defer func() {
		if recovered := recover(); recovered != nil {
			text := fmt.Sprintf("the parser panicked: %v", recovered)
			problem = &text
		}
	}()
	if err := parse(spec); err != nil {
		text := err.Error()
		return &text
	}
	return nil
}

func main() {
	if len(os.Args) != 2 || parsers[os.Args[1]] == nil {
		fmt.Fprintln(os.Stderr, "usage: cron kfp|vertex < crons (one JSON string a line)")
		os.Exit(2)
	}
	parse := parsers[os.Args[1]]
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 1<<20), 1<<20)
	out := bufio.NewWriter(os.Stdout)
	encoder := json.NewEncoder(out)
	for in.Scan() {
		var spec string
		if err := json.Unmarshal(in.Bytes(), &spec); err != nil {
			fmt.Fprintf(os.Stderr, "line %q is not a JSON string: %v\n", in.Text(), err)
			os.Exit(2)
		}
		if err := encoder.Encode(verdict{spec, judge(parse, spec)}); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
	}
	if err := in.Err(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	if err := out.Flush(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
}
