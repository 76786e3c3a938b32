package document

import (
	"bytes"
	"encoding/json"
	"fmt"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/cubefleet/cubefleet/internal/fieldrules"
	"github.com/cubefleet/cubefleet/internal/secretref"
)

// SchemaID is the $id of the JSON Schema Schema returns.
const SchemaID = "https://cubefleet.dev/schemas/fleet-document-v1.json"

// Schema returns the JSON Schema (draft 2020-12) of a version 1 fleet document, indented, with
// $id SchemaID and a description on every property (docs/fleet-document.md). It
// states every rule of Decode except those JSON Schema cannot express: names unique within their
// list (flavors by pool and name, offers by tenant), warm.min <= warm.max, no repeated keys in an
// object, and UTF-8 input. Every pattern uses only the regular expression constructs every
// draft 2020-12 validator compiles (fieldrules.Portable), and the text is ASCII: characters
// beyond it are written as JSON \u escapes, which a validator reads as the characters themselves.
// Each call returns a fresh copy.
func Schema() []byte {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(schema()); err != nil {
		panic("document: the schema does not encode: " + err.Error()) // a bug, caught by the tests
	}
	return asciiJSON(b.Bytes())
}

// asciiJSON writes every character of the JSON text j beyond ASCII as a \uXXXX escape (a
// surrogate pair beyond the Basic Multilingual Plane). Outside strings JSON is ASCII, so only
// strings change, and only in spelling.
func asciiJSON(j []byte) []byte {
	out := make([]byte, 0, len(j))
	for _, r := range string(j) {
		if r < utf8.RuneSelf {
			out = append(out, byte(r))
			continue
		}
		if r > 0xFFFF {
			hi, lo := utf16.EncodeRune(r)
			out = fmt.Appendf(out, `\u%04x\u%04x`, hi, lo)
			continue
		}
		out = fmt.Appendf(out, `\u%04x`, r)
	}
	return out
}

// obj is a JSON object that keeps its keys in the order written, so the schema reads top-down.
type obj []kv

type kv struct {
	k string
	v any
}

// MarshalJSON implements json.Marshaler.
func (o obj) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, e := range o {
		if i > 0 {
			b.WriteByte(',')
		}
		if err := encodeTo(&b, e.k); err != nil {
			return nil, err
		}
		b.WriteByte(':')
		if err := encodeTo(&b, e.v); err != nil {
			return nil, err
		}
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// encodeTo appends the compact JSON of v to b, leaving <, > and & as they are.
func encodeTo(b *bytes.Buffer, v any) error {
	enc := json.NewEncoder(b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return err
	}
	b.Truncate(b.Len() - 1) // Encode's newline
	return nil
}

func ref(def, description string) obj {
	return obj{{"description", description}, {"$ref", "#/$defs/" + def}}
}

// list is a list of def items; description holds a %d for the limit.
func list(def, description string) obj {
	return obj{{"description", fmt.Sprintf(description, fieldrules.MaxItems)}, {"type", "array"}, {"maxItems", fieldrules.MaxItems}, {"items", obj{{"$ref", "#/$defs/" + def}}}}
}

func str(description string, more ...kv) obj {
	return append(obj{{"description", description}, {"type", "string"}}, more...)
}

func integer(description string, r fieldrules.Range, more ...kv) obj {
	return append(obj{{"description", description}, {"type", "integer"}, {"minimum", r.Min}, {"maximum", r.Max}}, more...)
}

func enum(description string, values fieldrules.Enum) obj {
	return obj{{"description", description}, {"enum", values.Values()}}
}

// pattern is a string matching rule, described by description and the rule's words.
func pattern(description string, rule *fieldrules.Pattern) obj {
	return str(description+": "+rule.Rule()+".", kv{"pattern", rule.Pattern()})
}

// record is an object type with the given required fields and properties, and no others.
func record(description string, required []string, props obj, more ...kv) obj {
	o := obj{{"description", description}, {"type", "object"}}
	if len(required) > 0 {
		o = append(o, kv{"required", required})
	}
	o = append(o, kv{"properties", props}, kv{"additionalProperties", false})
	return append(o, more...)
}

// stringMap is config or env: strings of at most MaxValueLen characters under keys matching key,
// and secret references under keys naming a credential.
func stringMap(description string, key *fieldrules.Pattern, keyWhat, valueWhat string) obj {
	return obj{
		{"description", fmt.Sprintf("%s, at most %d.", description, fieldrules.MaxKeys)},
		{"type", "object"},
		{"maxProperties", fieldrules.MaxKeys},
		{"propertyNames", obj{{"description", keyWhat + ": " + key.Rule() + "."}, {"pattern", key.Pattern()}}},
		{"patternProperties", obj{{secretref.CredentialPattern, ref("secretRef",
			"A key that names a credential (it contains token, password, secret, key or credential, in any case) holds a secret reference, never the secret.")}}},
		{"additionalProperties", str(fmt.Sprintf("%s, at most %d characters.", valueWhat, fieldrules.MaxValueLen), kv{"maxLength", fieldrules.MaxValueLen})},
	}
}

func schema() obj {
	return obj{
		{"$schema", "https://json-schema.org/draft/2020-12/schema"},
		{"$id", SchemaID},
		{"title", "cubefleet fleet document, version 1"},
		{"description", "The shape of a fleet as code: sites, provider accounts, pools with their owner quotas and offers, flavors and sandbox templates, keyed by name. " +
			"Secrets appear only as references (secret://, vault://, env://). Beyond this schema, names are unique within their list (flavors by pool and name, offers by tenant), " +
			"warm.min is at most warm.max, no object repeats a key, and the file is UTF-8."},
		{"type", "object"},
		{"required", []string{"version"}},
		{"properties", obj{
			{schemaKey, obj{{"description", "The address of this JSON Schema (" + SchemaID + "), for editors and linters; cubefleet ignores it."}, {"type", "string"}}},
			{"version", obj{{"description", "The document format; always 1."}, {"const", version}}},
			{"sites", list("site", "The sites, %d at most, unique by name.")},
			{"providerAccounts", list("providerAccount", "The provider accounts, %d at most, unique by name.")},
			{"pools", list("pool", "The pools, %d at most, unique by name.")},
			{"flavors", list("flavor", "The flavors (VM sizes), %d at most, unique by pool and name.")},
			{"sandboxTemplates", list("sandboxTemplate", "The sandbox templates, %d at most, unique by name.")},
		}},
		{"additionalProperties", false},
		{"$defs", defs()},
	}
}

// egressPrefixPattern is the shape of an egressAllow entry (an address, "/", the prefix length);
// the ranges it must lie in are checked by fieldrules.CheckEgressPrefix.
const egressPrefixPattern = `^[0-9A-Fa-f.:]+/[0-9]{1,3}$`

// egressList is the schema of a list of egress prefixes (a template's egressAllow, a pool's
// policy.egressAllow): what describes it, then the rule every entry follows.
func egressList(what string) obj {
	return obj{{"description", fmt.Sprintf("%s %d at most, each %s.", what, fieldrules.MaxEgressAllow, fieldrules.EgressAllowRule)},
		{"type", "array"}, {"maxItems", fieldrules.MaxEgressAllow}, {"uniqueItems", true},
		{"items", obj{{"description", "A prefix in CIDR form, e.g. 10.20.0.0/16."}, {"type", "string"}, {"pattern", egressPrefixPattern}}}}
}

func defs() obj {
	quotaValue := integer("The maximum, a count (GiB for memoryGiB and diskGiB).", fieldrules.Quota)
	return obj{
		{"name", str("A name: "+nameRule+".", kv{"pattern", fieldrules.Name.Pattern()})},
		{"siteRef", str("A site's name, or the id of a site fleet did not create (site_ and 26 Crockford base32 characters).", kv{"pattern", siteRefPattern})},
		{"poolRef", str("A pool's name, or the id of a pool fleet did not create (pool_ and 26 Crockford base32 characters).", kv{"pattern", poolRefPattern})},
		{"secretRef", str("A secret reference: "+secretref.Forms+". Store a secret with `cubefleet secrets create`.",
			kv{"maxLength", fieldrules.MaxValueLen}, kv{"pattern", secretref.Pattern})},
		{"quota", obj{
			{"description", fmt.Sprintf("Maxima per resource, at most %d resources. The resources fleet enforces are %s; others are stored and shown.",
				fieldrules.MaxKeys, fieldrules.EnforcedResources.Rule())},
			{"type", "object"},
			{"maxProperties", fieldrules.MaxKeys},
			{"propertyNames", obj{{"description", "A resource name: " + fieldrules.Resource.Rule() + "."}, {"pattern", fieldrules.Resource.Pattern()}}},
			{"additionalProperties", quotaValue},
		}},
		{"site", record("A site, a place that holds pools.", []string{"name", "kind", "region"}, obj{
			{"name", ref("siteRef", "The site's name in the document, or its id.")},
			{"kind", enum("shared: pools sold to many tenants; dedicated: one tenant's.", fieldrules.SiteKinds)},
			{"region", pattern("The region label", fieldrules.Region)},
		})},
		{"providerAccount", record("A cloud account that provider pools buy servers from.", []string{"name", "provider"}, obj{
			{"name", ref("name", "The account's name.")},
			{"provider", enum("The cloud provider.", fieldrules.Providers)},
			{"config", stringMap("Provider settings as strings, e.g. token and location", fieldrules.ConfigKey, "A setting name", "A setting value")},
		})},
		{"pool", record("A pool of capacity at a site, with its owner's quota and the tenants it is offered to.", []string{"name", "site", "class"}, obj{
			{"name", ref("poolRef", "The pool's name in the document, or its id.")},
			{"site", ref("siteRef", "The site that holds the pool.")},
			{"class", enum("vps-host: hosts the platform owns; provider: servers bought through providerAccount.", fieldrules.PoolClasses)},
			{"gpuModel", pattern("The GPU model of the pool's hosts", fieldrules.GPUModel)},
			{"policy", record("The pool's operating policy.", nil, obj{
				{"disruptionBudget", obj{{"description", "The fraction of the pool's hosts that may be disrupted at once, from 0 to 1, e.g. 0.1."},
					{"type", "number"}, {"minimum", 0}, {"maximum", 1}}},
				{"egressAllow", egressList("The private prefixes the pool's sandboxes may reach: each entry of the egressAllow of a template on the pool lies inside one of them. Only the pool's owner sets it; left out: none.")},
			})},
			{"providerAccount", ref("name", "The provider account of a provider pool: required for class provider, forbidden for vps-host.")},
			{"ownerQuota", ref("quota", "What the pool's owner keeps, per resource.")},
			{"offers", obj{{"description", fmt.Sprintf("The tenants the pool is offered to, %d at most, at most one per tenant.", fieldrules.MaxItems)},
				{"type", "array"}, {"maxItems", fieldrules.MaxItems}, {"items", obj{{"$ref", "#/$defs/offer"}}}}},
		}, kv{"allOf", []obj{
			{{"if", obj{{"properties", obj{{"class", obj{{"description", "A provider pool..."}, {"const", fieldrules.PoolClassProvider}}}}}, {"required", []string{"class"}}}},
				{"then", obj{{"description", "...names its provider account."}, {"required", []string{"providerAccount"}}}}},
			{{"if", obj{{"properties", obj{{"class", obj{{"description", "A vps-host pool..."}, {"const", fieldrules.PoolClassVPSHost}}}}}, {"required", []string{"class"}}}},
				{"then", obj{{"description", "...has none."}, {"not", obj{{"required", []string{"providerAccount"}}}}}}},
		}})},
		{"offer", record("An offer of the pool to a tenant.", []string{"tenant"}, obj{
			{"tenant", ref("name", "The tenant id, a name such as acme.")},
			{"quota", ref("quota", "The tenant's maxima in the pool, per resource.")},
			{"priority", integer("The offer's priority among the tenant's offers, "+fieldrules.Priority.Span()+", higher first.", fieldrules.Priority, kv{"default", 0})},
		})},
		{"flavor", record("A VM size sold from a pool.", []string{"pool", "name", "vcpu", "memoryGiB", "diskGiB"}, obj{
			{"pool", ref("poolRef", "The pool the flavor is sold from.")},
			{"name", ref("name", "The flavor's name within its pool, e.g. g1.small.")},
			{"vcpu", integer("The number of virtual CPUs.", fieldrules.VCPU)},
			{"memoryGiB", integer("The memory, in GiB.", fieldrules.MemoryGiB)},
			{"diskGiB", integer("The disk size, in GiB.", fieldrules.DiskGiB)},
			{"gpu", integer("The number of GPUs.", fieldrules.GPU, kv{"default", 0})},
		})},
		{"sandboxTemplate", record("A sandbox shape (vps v0.5).", []string{"name", "pool", "flavor", "imageId", "network"}, obj{
			{"name", ref("name", "The template's name.")},
			{"pool", ref("poolRef", "The pool the sandboxes run in.")},
			{"flavor", ref("name", "The name of a flavor of the pool.")},
			{"imageId", append(pattern("The image the sandbox boots", fieldrules.ImageID), kv{"minLength", 1}, kv{"maxLength", fieldrules.MaxImageIDLen})},
			{"env", stringMap("Environment variables of the sandbox", fieldrules.EnvName, "A variable name", "A value")},
			{"network", enum("private: no inbound access from the internet; public: reachable from it.", fieldrules.Networks)},
			{"warm", record("Sandboxes kept booted ahead of demand; min must not exceed max.", []string{"min", "max"}, obj{
				{"min", integer("The least number of warm sandboxes (a count).", fieldrules.Warm)},
				{"max", integer("The most number of warm sandboxes (a count).", fieldrules.Warm)},
			})},
			{"terminationGraceSeconds", integer("Seconds a sandbox gets between SIGTERM and SIGKILL when it is stopped (deleted, timed out, evicted by a drain's deadline, agent down).", fieldrules.TerminationGrace, kv{"default", fieldrules.DefaultTerminationGraceSeconds})},
			{"disconnectGraceSeconds", integer("Seconds a running sandbox stays unknown after its node's last report (and runs on if the node comes back) before it is lost; left out: the server's --disconnect-grace.", fieldrules.DisconnectGrace)},
			{"runtime", enum("The sandbox runtime its sandboxes run on, and so the nodes they are placed on: process (confined processes on the host's kernel) or microvm (a virtual machine with its own guest kernel); left out: the node's default runtime.", fieldrules.Runtimes)},
			{"egressAllow", egressList("The private prefixes a public sandbox may reach besides the internet, each inside a prefix of the pool's policy.egressAllow. The node's own addresses, the control plane, other sandboxes and metadata addresses stay unreachable inside them. Only for network public.")},
		})},
	}
}
