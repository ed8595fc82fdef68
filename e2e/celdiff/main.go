// celdiff evaluates DRA CEL selectors and runs the structured allocator of Kubernetes v1.37.2
// (k8s.io/dynamic-resource-allocation@v0.37.2, k8s.io/apiserver CEL libraries) on JSON cases, so that
// tests/test_differential.py can compare dra-scheduler's Python CEL environment and allocator with them.
//
// Input (stdin), one JSON object with two lists: "cel", each case {"expr", "device": {"driver",
// "attributes", "capacity", "allowMultipleAllocations"}} (attributes and capacity in their
// resource.k8s.io/v1 JSON form), and "alloc", each case {"classes", "slices", "claims", "node",
// "allocated": ["driver/pool/device", ...]}.
//
// Output (stdout), the same lists of results: a CEL case gives "result" (bool), "compileError" or
// "runtimeError", with "maxCost" (cel-go's estimate); an allocation case gives "allocations"
// (AllocationResult per claim), "unschedulable" or "error".
//
// Built by e2e/celdiff/build.sh with the wrapper module e2e/gobuild/celdiff (see e2e/README.md).
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	dracel "k8s.io/dynamic-resource-allocation/cel"
	"k8s.io/dynamic-resource-allocation/structured"
)

type celDevice struct {
	Driver                   string                                                    `json:"driver"`
	Attributes               map[resourceapi.QualifiedName]resourceapi.DeviceAttribute `json:"attributes"`
	Capacity                 map[resourceapi.QualifiedName]resourceapi.DeviceCapacity  `json:"capacity"`
	AllowMultipleAllocations bool                                                      `json:"allowMultipleAllocations"`
}

type celCase struct {
	Expr   string    `json:"expr"`
	Device celDevice `json:"device"`
}

type celResult struct {
	// MaxCost is cel-go's estimated worst-case cost: the API server refuses to store a selector whose
	// estimate exceeds resourceapi.CELSelectorExpressionMaxCost.
	MaxCost      uint64 `json:"maxCost,omitempty"`
	Result       *bool  `json:"result,omitempty"`
	CompileError string `json:"compileError,omitempty"`
	RuntimeError string `json:"runtimeError,omitempty"`
}

type allocCase struct {
	Classes   []*resourceapi.DeviceClass   `json:"classes"`
	Slices    []*resourceapi.ResourceSlice `json:"slices"`
	Claims    []*resourceapi.ResourceClaim `json:"claims"`
	Node      *v1.Node                     `json:"node"`
	Allocated []string                     `json:"allocated"`
}

type allocResult struct {
	Allocations   []resourceapi.AllocationResult `json:"allocations,omitempty"`
	Unschedulable bool                           `json:"unschedulable,omitempty"`
	Error         string                         `json:"error,omitempty"`
}

type input struct {
	CEL   []celCase   `json:"cel"`
	Alloc []allocCase `json:"alloc"`
}

type output struct {
	CEL   []celResult   `json:"cel"`
	Alloc []allocResult `json:"alloc"`
}

type classLister map[string]*resourceapi.DeviceClass

func (l classLister) Get(name string) (*resourceapi.DeviceClass, error) {
	if c, ok := l[name]; ok {
		return c, nil
	}
	return nil, fmt.Errorf("device class %s does not exist", name)
}

func (l classLister) List() ([]*resourceapi.DeviceClass, error) {
	out := make([]*resourceapi.DeviceClass, 0, len(l))
	for _, c := range l {
		out = append(out, c)
	}
	return out, nil
}

// The features of kube-scheduler 1.37.2 with default feature gates that both allocators implement.
var features = structured.Features{
	AdminAccess:            true,
	PrioritizedList:        true,
	PartitionableDevices:   true,
	DeviceTaints:           true,
	ConsumableCapacity:     true,
	DeviceBindingAndStatus: true,
	ListTypeAttributes:     true,
}

func evalCEL(c celCase) (res celResult) {
	defer func() {
		if r := recover(); r != nil {
			res = celResult{RuntimeError: fmt.Sprintf("panic: %v", r)}
		}
	}()
	compiler := dracel.GetCompiler(dracel.Features{EnableConsumableCapacity: true, EnableListTypeAttributes: true})
	result := compiler.CompileCELExpression(c.Expr, dracel.Options{})
	if result.Error != nil {
		return celResult{CompileError: result.Error.Error()}
	}
	multi := c.Device.AllowMultipleAllocations
	ok, _, err := result.DeviceMatches(context.Background(), dracel.Device{
		Driver:                   c.Device.Driver,
		Attributes:               c.Device.Attributes,
		Capacity:                 c.Device.Capacity,
		AllowMultipleAllocations: &multi,
	})
	if err != nil {
		return celResult{RuntimeError: err.Error(), MaxCost: result.MaxCost}
	}
	return celResult{Result: &ok, MaxCost: result.MaxCost}
}

func runAlloc(c allocCase) (res allocResult) {
	defer func() {
		if r := recover(); r != nil {
			res = allocResult{Error: fmt.Sprintf("panic: %v", r)}
		}
	}()
	ctx := context.Background()
	classes := classLister{}
	for _, cl := range c.Classes {
		classes[cl.Name] = cl
	}
	state := structured.AllocatedState{
		AllocatedDevices:         sets.New[structured.DeviceID](),
		AllocatedSharedDeviceIDs: sets.New[structured.SharedDeviceID](),
		AggregatedCapacity:       structured.NewConsumedCapacityCollection(),
	}
	for _, id := range c.Allocated {
		p := strings.SplitN(id, "/", 3)
		state.AllocatedDevices.Insert(structured.MakeDeviceID(p[0], p[1], p[2]))
	}
	alloc, err := structured.NewAllocator(ctx, features, state, classes, c.Slices, dracel.NewCache(10, dracel.Features{EnableConsumableCapacity: true, EnableListTypeAttributes: true}))
	if err != nil {
		return allocResult{Error: err.Error()}
	}
	results, err := alloc.Allocate(ctx, c.Node, c.Claims)
	if err != nil {
		return allocResult{Error: err.Error()}
	}
	if results == nil {
		return allocResult{Unschedulable: true}
	}
	return allocResult{Allocations: results}
}

func main() {
	var in input
	dec := json.NewDecoder(os.Stdin)
	if err := dec.Decode(&in); err != nil {
		fmt.Fprintf(os.Stderr, "celdiff: reading input: %v\n", err)
		os.Exit(2)
	}
	out := output{CEL: make([]celResult, 0, len(in.CEL)), Alloc: make([]allocResult, 0, len(in.Alloc))}
	for _, c := range in.CEL {
		out.CEL = append(out.CEL, evalCEL(c))
	}
	for _, c := range in.Alloc {
		out.Alloc = append(out.Alloc, runAlloc(c))
	}
	enc := json.NewEncoder(os.Stdout)
	if err := enc.Encode(out); err != nil {
		fmt.Fprintf(os.Stderr, "celdiff: writing output: %v\n", err)
		os.Exit(2)
	}
}
