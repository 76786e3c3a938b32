package document

import (
	"bytes"
	"encoding/json"
)

// SchemaID is the $id of the JSON Schema Schema returns.
const SchemaID = "https://cubefleet.dev/schemas/fleet-document-v1.json"

// Schema returns the JSON Schema (draft 2020-12) of a version 1 fleet document, indented, with
// $id SchemaID and a description on every property (specs/fleet-config.md, "The document"). It
// states every rule of Decode except those JSON Schema cannot express: names unique within their
// list (flavors by pool and name, offers by tenant), warm.min <= warm.max, no repeated keys in an
// object, and UTF-8 input. The patterns mean the same in ECMA-262 and Go's RE2. Each call returns
// a fresh copy.
func Schema() []byte {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(schema()); err != nil {
		panic("document: the schema does not encode: " + err.Error()) // a bug, caught by the tests
	}
	return b.Bytes()
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

func list(def, description string) obj {
	return obj{{"description", description}, {"type", "array"}, {"maxItems", maxItems}, {"items", obj{{"$ref", "#/$defs/" + def}}}}
}

func str(description string, more ...kv) obj {
	return append(obj{{"description", description}, {"type", "string"}}, more...)
}

func integer(description string, lo, hi int64, more ...kv) obj {
	return append(obj{{"description", description}, {"type", "integer"}, {"minimum", lo}, {"maximum", hi}}, more...)
}

func enum(description string, values []string) obj {
	return obj{{"description", description}, {"enum", values}}
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

// stringMap is config or env: strings of at most 4096 characters under keys matching keyPattern,
// and secret references under keys naming a credential.
func stringMap(description, keyPattern, keyRule, valueRule string) obj {
	return obj{
		{"description", description},
		{"type", "object"},
		{"maxProperties", maxKeys},
		{"propertyNames", obj{{"description", keyRule}, {"pattern", keyPattern}}},
		{"patternProperties", obj{{secretKeyPattern, ref("secretRef",
			"A key that names a credential (it contains token, password, secret, key or credential, in any case) holds a secret reference, never the secret.")}}},
		{"additionalProperties", str(valueRule, kv{"maxLength", maxValueLen})},
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
			{"version", obj{{"description", "The document format; always 1."}, {"const", version}}},
			{"sites", list("site", "The sites, at most 1000, unique by name.")},
			{"providerAccounts", list("providerAccount", "The provider accounts, at most 1000, unique by name.")},
			{"pools", list("pool", "The pools, at most 1000, unique by name.")},
			{"flavors", list("flavor", "The flavors (VM sizes), at most 1000, unique by pool and name.")},
			{"sandboxTemplates", list("sandboxTemplate", "The sandbox templates, at most 1000, unique by name.")},
		}},
		{"additionalProperties", false},
		{"$defs", defs()},
	}
}

func defs() obj {
	quotaValue := integer("The maximum, a count (GiB for memoryGiB and diskGiB).", 0, maxQuota)
	return obj{
		{"name", str("A name: "+nameRule+".", kv{"pattern", namePattern})},
		{"siteRef", str("A site's name, or the id of a site fleet did not create (site_ and 26 Crockford base32 characters).", kv{"pattern", siteRefPattern})},
		{"poolRef", str("A pool's name, or the id of a pool fleet did not create (pool_ and 26 Crockford base32 characters).", kv{"pattern", poolRefPattern})},
		{"secretRef", str("A secret reference: "+secretRefRule+". Store a secret with `cubefleet secrets create`.",
			kv{"maxLength", maxValueLen}, kv{"pattern", secretRefPattern})},
		{"quota", obj{
			{"description", "Maxima per resource, at most 256 resources. The resources fleet enforces are vcpu, memoryGiB, diskGiB, gpu and sandboxes; others are stored and shown."},
			{"type", "object"},
			{"maxProperties", maxKeys},
			{"propertyNames", obj{{"description", "A resource name: a letter, then up to 63 letters, digits, '.', '_' or '-'."}, {"pattern", resourcePattern}}},
			{"additionalProperties", quotaValue},
		}},
		{"site", record("A site, a place that holds pools.", []string{"name", "kind", "region"}, obj{
			{"name", ref("siteRef", "The site's name in the document, or its id.")},
			{"kind", enum("shared: pools sold to many tenants; dedicated: one tenant's.", siteKinds)},
			{"region", str("The region label, e.g. eu-central: 1-63 lower-case letters, digits or '-', starting with a letter or digit.", kv{"pattern", regionPattern})},
		})},
		{"providerAccount", record("A cloud account that provider pools buy servers from.", []string{"name", "provider"}, obj{
			{"name", ref("name", "The account's name.")},
			{"provider", enum("The cloud provider.", providers)},
			{"config", stringMap("Provider settings as strings, at most 256; e.g. token and location.", configKeyPattern,
				"A setting name: 1-63 letters, digits, '_', '.' or '-'.", "A setting value, at most 4096 characters.")},
		})},
		{"pool", record("A pool of capacity at a site, with its owner's quota and the tenants it is offered to.", []string{"name", "site", "class"}, obj{
			{"name", ref("poolRef", "The pool's name in the document, or its id.")},
			{"site", ref("siteRef", "The site that holds the pool.")},
			{"class", enum("vps-host: hosts the platform owns; provider: servers bought through providerAccount.", poolClass)},
			{"gpuModel", str("The GPU model of the pool's hosts, e.g. L40S: 1-63 letters, digits, '.', '_' or '-'.", kv{"pattern", gpuModelPattern})},
			{"policy", record("The pool's operating policy.", nil, obj{
				{"disruptionBudget", obj{{"description", "The fraction of the pool's hosts that may be disrupted at once, from 0 to 1, e.g. 0.1."},
					{"type", "number"}, {"minimum", 0}, {"maximum", 1}}},
			})},
			{"providerAccount", ref("name", "The provider account of a provider pool: required for class provider, forbidden for vps-host.")},
			{"ownerQuota", ref("quota", "What the pool's owner keeps, per resource.")},
			{"offers", obj{{"description", "The tenants the pool is offered to, at most 1000, at most one per tenant."},
				{"type", "array"}, {"maxItems", maxItems}, {"items", obj{{"$ref", "#/$defs/offer"}}}}},
		}, kv{"allOf", []obj{
			{{"if", obj{{"properties", obj{{"class", obj{{"description", "A provider pool..."}, {"const", "provider"}}}}}, {"required", []string{"class"}}}},
				{"then", obj{{"description", "...names its provider account."}, {"required", []string{"providerAccount"}}}}},
			{{"if", obj{{"properties", obj{{"class", obj{{"description", "A vps-host pool..."}, {"const", "vps-host"}}}}}, {"required", []string{"class"}}}},
				{"then", obj{{"description", "...has none."}, {"not", obj{{"required", []string{"providerAccount"}}}}}}},
		}})},
		{"offer", record("An offer of the pool to a tenant.", []string{"tenant"}, obj{
			{"tenant", ref("name", "The tenant id, a name such as acme.")},
			{"quota", ref("quota", "The tenant's maxima in the pool, per resource.")},
			{"priority", integer("The offer's priority among the tenant's offers, 0 to 1000.", 0, maxPriority, kv{"default", 0})},
		})},
		{"flavor", record("A VM size sold from a pool.", []string{"pool", "name", "vcpu", "memoryGiB", "diskGiB"}, obj{
			{"pool", ref("poolRef", "The pool the flavor is sold from.")},
			{"name", ref("name", "The flavor's name within its pool, e.g. g1.small.")},
			{"vcpu", integer("The number of virtual CPUs.", 1, maxVCPU)},
			{"memoryGiB", integer("The memory, in GiB.", 1, maxMemoryGiB)},
			{"diskGiB", integer("The disk size, in GiB.", 1, maxDiskGiB)},
			{"gpu", integer("The number of GPUs.", 0, maxGPU, kv{"default", 0})},
		})},
		{"sandboxTemplate", record("A sandbox shape (vps v0.5).", []string{"name", "pool", "flavor", "imageId", "network"}, obj{
			{"name", ref("name", "The template's name.")},
			{"pool", ref("poolRef", "The pool the sandboxes run in.")},
			{"flavor", ref("name", "The name of a flavor of the pool.")},
			{"imageId", str("The image the sandbox boots, e.g. ubuntu-24.04: 1-255 characters without whitespace or control characters.",
				kv{"minLength", 1}, kv{"maxLength", 255}, kv{"pattern", imageIDPattern})},
			{"env", stringMap("Environment variables of the sandbox, at most 256.", envNamePattern,
				"A variable name: a letter or '_', then up to 254 letters, digits or '_'.", "A value, at most 4096 characters.")},
			{"network", enum("private: no inbound access from the internet; public: reachable from it.", networks)},
			{"warm", record("Sandboxes kept booted ahead of demand; min must not exceed max.", []string{"min", "max"}, obj{
				{"min", integer("The least number of warm sandboxes (a count).", 0, maxWarm)},
				{"max", integer("The most number of warm sandboxes (a count).", 0, maxWarm)},
			})},
		})},
	}
}
