package document

import (
	"os"
	"strconv"
	"strings"
	"testing"
)

// A fixture is one document every test reads: the table of bad documents, the good documents,
// the schema agreement test, and the fuzz seed corpus.
type fixture struct {
	name string
	json string
	// path is the first details.path of the error; "" with ok set means the document is valid.
	path string
	ok   bool
	// paths, when set, is every path the error lists, in order.
	paths []string
	// gap, when set, is why the JSON Schema cannot see this problem: the schema accepts the
	// document and Decode rejects it.
	gap string
}

// The reasons JSON Schema cannot express a rule.
const (
	gapUnique = "uniqueness by a field of the items: uniqueItems compares whole items"
	gapDupKey = "repeated JSON keys: the schema library's decoder keeps the last one"
	gapWarm   = "warm.min <= warm.max compares two fields"
	gapUTF8   = "invalid UTF-8: the schema library's decoder replaces it with U+FFFD"
	gapEgress = "an egressAllow prefix's range (private, no metadata address, no host bits) and the network it needs are checked in code, not by a pattern"
	gapPolicy = "a template's egressAllow inside its pool's policy.egressAllow compares two items"
)

// Items that are valid on their own, to build fixtures from.
const (
	siteOK           = `{"name":"fra","kind":"shared","region":"eu-central"}`
	accountOK        = `{"name":"cloud","provider":"hetzner-cloud","config":{"token":"secret://hetzner","location":"fsn1"}}`
	poolOK           = `{"name":"vps-fra","site":"fra","class":"vps-host"}`
	flavorOK         = `{"pool":"vps-fra","name":"g1.small","vcpu":2,"memoryGiB":4,"diskGiB":40}`
	publicTemplateOK = `{"name":"py-small","pool":"vps-fra","flavor":"g1.small","imageId":"ubuntu-24.04","network":"public"}`
	templateOK       = `{"name":"py-small","pool":"vps-fra","flavor":"g1.small","imageId":"ubuntu-24.04","network":"private"}`
)

// doc returns a version 1 document whose list holds items.
func doc(list string, items ...string) string {
	return `{"version":1,"` + list + `":[` + strings.Join(items, ",") + `]}`
}

// with returns item with extra fields added last.
func with(item, extra string) string {
	return strings.TrimSuffix(item, "}") + "," + extra + "}"
}

// repeat returns n copies of item, NAME replaced by vary(i) in copy i.
func repeat(item string, n int, vary func(i int) string) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = strings.Replace(item, "NAME", vary(i), 1)
	}
	return out
}

func badFixtures() []fixture {
	long := strings.Repeat("a", 64)
	return []fixture{
		// Input that is not one JSON object.
		{name: "empty", json: ``, path: ""},
		{name: "blank", json: " \n\t ", path: ""},
		{name: "trailing comma", json: `{"version":1,}`, path: ""},
		{name: "truncated", json: `{"version":1,"sites":[`, path: ""},
		{name: "trailing object", json: `{"version":1} {"version":1}`, path: ""},
		{name: "trailing garbage", json: `{"version":1}x`, path: ""},
		{name: "byte order mark", json: "\xef\xbb\xbf{\"version\":1}", path: ""},
		{name: "root array", json: `[{"version":1}]`, paths: []string{""}},
		{name: "root null", json: `null`, paths: []string{""}},
		{name: "root string", json: `"version"`, paths: []string{""}},
		{name: "too deep", json: `{"version":1,"x":` + strings.Repeat("[", 40) + strings.Repeat("]", 40) + `}`, path: ""},
		{name: "invalid utf-8", json: doc("providerAccounts", `{"name":"a","provider":"hetzner-cloud","config":{"location":"fsn`+"\xff"+`"}}`), path: "", gap: gapUTF8},

		// The document.
		{name: "missing version", json: `{}`, path: "version"},
		{name: "version 2", json: `{"version":2}`, path: "version"},
		{name: "version string", json: `{"version":"1"}`, path: "version"},
		{name: "version fraction", json: `{"version":1.5}`, path: "version"},
		{name: "unknown root field", json: `{"version":1,"site":[]}`, path: "site"},
		{name: "$schema not a string", json: `{"$schema":1,"version":1}`, path: `["$schema"]`},
		{name: "$schema repeated", json: `{"$schema":"a","version":1,"$schema":"b"}`, path: `["$schema"]`, gap: gapDupKey},
		{name: "$id is not a field", json: `{"$id":"x","version":1}`, path: `["$id"]`},
		{name: "repeated key", json: `{"version":1,"version":1}`, path: "version", gap: gapDupKey},
		{name: "sites not a list", json: `{"version":1,"sites":{}}`, path: "sites"},
		{name: "site not an object", json: doc("sites", `"fra"`), path: "sites[0]"},
		{name: "sites null", json: `{"version":1,"sites":null}`, path: "sites"},

		// Sites.
		{name: "site missing kind", json: doc("sites", `{"name":"fra","region":"eu-central"}`), path: "sites[0].kind"},
		{name: "site bad kind", json: doc("sites", `{"name":"fra","kind":"public","region":"eu-central"}`), path: "sites[0].kind"},
		{name: "site bad region", json: doc("sites", `{"name":"fra","kind":"shared","region":"EU_central"}`), path: "sites[0].region"},
		{name: "site upper-case name", json: doc("sites", `{"name":"Fra","kind":"shared","region":"eu"}`), path: "sites[0].name"},
		{name: "site name with slash", json: doc("sites", `{"name":"a/b","kind":"shared","region":"eu"}`), path: "sites[0].name"},
		{name: "site name with arrow", json: doc("sites", `{"name":"a -> b","kind":"shared","region":"eu"}`), path: "sites[0].name"},
		{name: "site name too long", json: doc("sites", `{"name":"`+long+`","kind":"shared","region":"eu"}`), path: "sites[0].name"},
		{name: "site named by a pool id", json: doc("sites", `{"name":"pool_01JQ3ZK4Y6M8N9P0Q1R2S3T4V5","kind":"shared","region":"eu"}`), path: "sites[0].name"},
		{name: "site name null", json: doc("sites", `{"name":null,"kind":"shared","region":"eu"}`), path: "sites[0].name"},
		{name: "site unknown field", json: doc("sites", with(siteOK, `"zone":"a"`)), path: "sites[0].zone"},
		{name: "site repeated", json: doc("sites", siteOK, siteOK), path: "sites[1].name", gap: gapUnique},
		{name: "too many sites", json: doc("sites", repeat(`{"name":"NAME","kind":"shared","region":"eu"}`, 1001, func(i int) string { return "s" + itoa(i) })...), path: "sites"},

		// Provider accounts.
		{name: "account bad provider", json: doc("providerAccounts", `{"name":"cloud","provider":"aws"}`), path: "providerAccounts[0].provider"},
		{name: "account literal token", json: doc("providerAccounts", `{"name":"cloud","provider":"hetzner-cloud","config":{"token":"hunter2-literal"}}`), path: "providerAccounts[0].config.token"},
		{name: "account literal api key", json: doc("providerAccounts", `{"name":"cloud","provider":"ionos-cloud","config":{"apiKEY":"hunter2-literal"}}`), path: "providerAccounts[0].config.apiKEY"},
		{name: "account malformed secret ref", json: doc("providerAccounts", `{"name":"cloud","provider":"hetzner-cloud","config":{"token":"secret://"}}`), path: "providerAccounts[0].config.token"},
		{name: "account vault ref with space", json: doc("providerAccounts", `{"name":"cloud","provider":"hetzner-cloud","config":{"password":"vault://kv/a b#pw"}}`), path: "providerAccounts[0].config.password"},
		{name: "account env ref bad name", json: doc("providerAccounts", `{"name":"cloud","provider":"hetzner-cloud","config":{"credentials":"env://1TOKEN"}}`), path: "providerAccounts[0].config.credentials"},
		{name: "account config number", json: doc("providerAccounts", `{"name":"cloud","provider":"hetzner-cloud","config":{"location":1}}`), path: "providerAccounts[0].config.location"},
		{name: "account config bad key", json: doc("providerAccounts", `{"name":"cloud","provider":"hetzner-cloud","config":{"bad key":"x"}}`), path: `providerAccounts[0].config["bad key"]`},
		{name: "account config value too long", json: doc("providerAccounts", `{"name":"cloud","provider":"hetzner-cloud","config":{"location":"`+strings.Repeat("é", 4097)+`"}}`), path: "providerAccounts[0].config.location"},
		{name: "account config too many keys", json: doc("providerAccounts", `{"name":"cloud","provider":"hetzner-cloud","config":{`+strings.Join(repeat(`"NAME":"x"`, 257, func(i int) string { return "k" + itoa(i) }), ",")+`}}`), path: "providerAccounts[0].config"},
		{name: "account config repeated key", json: doc("providerAccounts", `{"name":"cloud","provider":"hetzner-cloud","config":{"location":"a","location":"b"}}`), path: "providerAccounts[0].config.location", gap: gapDupKey},
		{name: "account repeated", json: doc("providerAccounts", accountOK, accountOK), path: "providerAccounts[1].name", gap: gapUnique},

		// Pools.
		{name: "pool provider without account", json: doc("pools", `{"name":"burst","site":"fra","class":"provider"}`), path: "pools[0].providerAccount"},
		{name: "pool vps-host with account", json: doc("pools", with(poolOK, `"providerAccount":"cloud"`)), path: "pools[0].providerAccount"},
		{name: "pool bad class", json: doc("pools", `{"name":"p","site":"fra","class":"bare-metal"}`), path: "pools[0].class"},
		{name: "pool missing site", json: doc("pools", `{"name":"p","class":"vps-host"}`), path: "pools[0].site"},
		{name: "pool site by pool id", json: doc("pools", `{"name":"p","site":"pool_01JQ3ZK4Y6M8N9P0Q1R2S3T4V5","class":"vps-host"}`), path: "pools[0].site"},
		{name: "pool empty gpuModel", json: doc("pools", with(poolOK, `"gpuModel":""`)), path: "pools[0].gpuModel"},
		{name: "pool gpuModel with space", json: doc("pools", with(poolOK, `"gpuModel":"L40 S"`)), path: "pools[0].gpuModel"},
		{name: "pool empty account", json: doc("pools", `{"name":"burst","site":"fra","class":"provider","providerAccount":""}`), path: "pools[0].providerAccount"},
		{name: "budget above 1", json: doc("pools", with(poolOK, `"policy":{"disruptionBudget":1.5}`)), path: "pools[0].policy.disruptionBudget"},
		{name: "budget negative", json: doc("pools", with(poolOK, `"policy":{"disruptionBudget":-0.1}`)), path: "pools[0].policy.disruptionBudget"},
		{name: "budget just above 1", json: doc("pools", with(poolOK, `"policy":{"disruptionBudget":1.0000000000000000001}`)), path: "pools[0].policy.disruptionBudget"},
		{name: "budget huge exponent", json: doc("pools", with(poolOK, `"policy":{"disruptionBudget":1e400}`)), path: "pools[0].policy.disruptionBudget"},
		{name: "budget string", json: doc("pools", with(poolOK, `"policy":{"disruptionBudget":"0.1"}`)), path: "pools[0].policy.disruptionBudget"},
		{name: "policy unknown field", json: doc("pools", with(poolOK, `"policy":{"maxUnavailable":1}`)), path: "pools[0].policy.maxUnavailable"},
		{name: "policy null", json: doc("pools", with(poolOK, `"policy":null`)), path: "pools[0].policy"},
		{name: "owner quota negative", json: doc("pools", with(poolOK, `"ownerQuota":{"gpu":-1}`)), path: "pools[0].ownerQuota.gpu"},
		{name: "owner quota fraction", json: doc("pools", with(poolOK, `"ownerQuota":{"gpu":1.5}`)), path: "pools[0].ownerQuota.gpu"},
		{name: "owner quota string", json: doc("pools", with(poolOK, `"ownerQuota":{"gpu":"3"}`)), path: "pools[0].ownerQuota.gpu"},
		{name: "owner quota above 2^53", json: doc("pools", with(poolOK, `"ownerQuota":{"gpu":9007199254740993}`)), path: "pools[0].ownerQuota.gpu"},
		{name: "owner quota bad resource", json: doc("pools", with(poolOK, `"ownerQuota":{"1gpu":1}`)), path: "pools[0].ownerQuota.1gpu"},
		{name: "offer missing tenant", json: doc("pools", with(poolOK, `"offers":[{"quota":{"gpu":1}}]`)), path: "pools[0].offers[0].tenant"},
		{name: "offer tenant id", json: doc("pools", with(poolOK, `"offers":[{"tenant":"Acme"}]`)), path: "pools[0].offers[0].tenant"},
		{name: "offer priority too high", json: doc("pools", with(poolOK, `"offers":[{"tenant":"acme","priority":1001}]`)), path: "pools[0].offers[0].priority"},
		{name: "offer priority fraction", json: doc("pools", with(poolOK, `"offers":[{"tenant":"acme","priority":2.5}]`)), path: "pools[0].offers[0].priority"},
		{name: "offer quota resource with dot too long", json: doc("pools", with(poolOK, `"offers":[{"tenant":"acme","quota":{"gpu.`+long+`":1}}]`)), path: `pools[0].offers[0].quota["gpu.` + long + `"]`},
		{name: "offer quota key", json: doc("pools", with(poolOK, `"offers":[{"tenant":"acme","quota":{"gpu":1,"x y":2}}]`)), path: `pools[0].offers[0].quota["x y"]`},
		{name: "offer repeated tenant", json: doc("pools", with(poolOK, `"offers":[{"tenant":"acme"},{"tenant":"globex"},{"tenant":"acme","priority":1}]`)), path: "pools[0].offers[2].tenant", gap: gapUnique},
		{name: "too many offers", json: doc("pools", with(poolOK, `"offers":[`+strings.Join(repeat(`{"tenant":"NAME"}`, 1001, func(i int) string { return "t" + itoa(i) }), ",")+`]`)), path: "pools[0].offers"},
		{name: "pool repeated", json: doc("pools", poolOK, poolOK), path: "pools[1].name", gap: gapUnique},

		// Flavors.
		{name: "flavor no vcpu", json: doc("flavors", `{"pool":"p","name":"f","vcpu":0,"memoryGiB":4,"diskGiB":40}`), path: "flavors[0].vcpu"},
		{name: "flavor vcpu too many", json: doc("flavors", `{"pool":"p","name":"f","vcpu":4097,"memoryGiB":4,"diskGiB":40}`), path: "flavors[0].vcpu"},
		{name: "flavor vcpu string", json: doc("flavors", `{"pool":"p","name":"f","vcpu":"2","memoryGiB":4,"diskGiB":40}`), path: "flavors[0].vcpu"},
		{name: "flavor missing memory", json: doc("flavors", `{"pool":"p","name":"f","vcpu":2,"diskGiB":40}`), path: "flavors[0].memoryGiB"},
		{name: "flavor disk too big", json: doc("flavors", `{"pool":"p","name":"f","vcpu":2,"memoryGiB":4,"diskGiB":1048577}`), path: "flavors[0].diskGiB"},
		{name: "flavor gpu too many", json: doc("flavors", with(flavorOK, `"gpu":65`)), path: "flavors[0].gpu"},
		{name: "flavor name with slash", json: doc("flavors", `{"pool":"p","name":"g1/small","vcpu":2,"memoryGiB":4,"diskGiB":40}`), path: "flavors[0].name"},
		{name: "flavor pool by site id", json: doc("flavors", `{"pool":"site_01JQ3ZK4Y6M8N9P0Q1R2S3T4V5","name":"f","vcpu":2,"memoryGiB":4,"diskGiB":40}`), path: "flavors[0].pool"},
		{name: "flavor repeated in its pool", json: doc("flavors", flavorOK, strings.Replace(flavorOK, `"pool":"vps-fra"`, `"pool":"burst"`, 1), flavorOK), path: "flavors[2].name", gap: gapUnique},

		// Sandbox templates.
		{name: "template image with space", json: doc("sandboxTemplates", strings.Replace(templateOK, "ubuntu-24.04", "ubuntu 24.04", 1)), path: "sandboxTemplates[0].imageId"},
		{name: "template image with nbsp", json: doc("sandboxTemplates", strings.Replace(templateOK, "ubuntu-24.04", "ubuntu\u00a024.04", 1)), path: "sandboxTemplates[0].imageId"},
		{name: "template image too long", json: doc("sandboxTemplates", strings.Replace(templateOK, "ubuntu-24.04", strings.Repeat("i", 256), 1)), path: "sandboxTemplates[0].imageId"},
		{name: "template image empty", json: doc("sandboxTemplates", strings.Replace(templateOK, "ubuntu-24.04", "", 1)), path: "sandboxTemplates[0].imageId"},
		{name: "template literal password", json: doc("sandboxTemplates", with(templateOK, `"env":{"DB_PASSWORD":"hunter2-literal"}`)), path: "sandboxTemplates[0].env.DB_PASSWORD"},
		{name: "template bad env name", json: doc("sandboxTemplates", with(templateOK, `"env":{"1X":"y"}`)), path: "sandboxTemplates[0].env.1X"},
		{name: "template missing network", json: doc("sandboxTemplates", `{"name":"t","pool":"p","flavor":"f","imageId":"i"}`), path: "sandboxTemplates[0].network"},
		{name: "template bad network", json: doc("sandboxTemplates", strings.Replace(templateOK, "private", "internal", 1)), path: "sandboxTemplates[0].network"},
		{name: "template flavor with colon", json: doc("sandboxTemplates", strings.Replace(templateOK, `"flavor":"g1.small"`, `"flavor":"vps-fra:g1"`, 1)), path: "sandboxTemplates[0].flavor"},
		{name: "warm min above max", json: doc("sandboxTemplates", with(templateOK, `"warm":{"min":5,"max":2}`)), path: "sandboxTemplates[0].warm.min", gap: gapWarm},
		{name: "warm max too big", json: doc("sandboxTemplates", with(templateOK, `"warm":{"min":0,"max":1001}`)), path: "sandboxTemplates[0].warm.max"},
		{name: "warm missing max", json: doc("sandboxTemplates", with(templateOK, `"warm":{"min":1}`)), path: "sandboxTemplates[0].warm.max"},
		{name: "template repeated", json: doc("sandboxTemplates", templateOK, templateOK), path: "sandboxTemplates[1].name", gap: gapUnique},
		{name: "template bad runtime", json: doc("sandboxTemplates", with(templateOK, `"runtime":"kvm"`)), path: "sandboxTemplates[0].runtime"},
		{name: "template empty runtime", json: doc("sandboxTemplates", with(templateOK, `"runtime":""`)), path: "sandboxTemplates[0].runtime"},
		{name: "template egressAllow not a list", json: doc("sandboxTemplates", with(publicTemplateOK, `"egressAllow":"10.20.0.0/16"`)), path: "sandboxTemplates[0].egressAllow"},
		{name: "template egressAllow number", json: doc("sandboxTemplates", with(publicTemplateOK, `"egressAllow":["10.20.0.0/16",10]`)), path: "sandboxTemplates[0].egressAllow[1]"},
		{name: "template egressAllow not a prefix", json: doc("sandboxTemplates", with(publicTemplateOK, `"egressAllow":["10.20.0.1"]`)), path: "sandboxTemplates[0].egressAllow[0]"},
		{name: "template egressAllow repeated", json: doc("sandboxTemplates", with(publicTemplateOK, `"egressAllow":["10.20.0.0/16","10.20.0.0/16"]`)), path: "sandboxTemplates[0].egressAllow[1]"},
		{name: "template egressAllow metadata", json: doc("sandboxTemplates", with(publicTemplateOK, `"egressAllow":["100.64.0.0/10"]`)), path: "sandboxTemplates[0].egressAllow[0]", gap: gapEgress},
		{name: "template egressAllow link-local", json: doc("sandboxTemplates", with(publicTemplateOK, `"egressAllow":["169.254.0.0/16"]`)), path: "sandboxTemplates[0].egressAllow[0]", gap: gapEgress},
		{name: "template egressAllow public range", json: doc("sandboxTemplates", with(publicTemplateOK, `"egressAllow":["198.51.100.0/24"]`)), path: "sandboxTemplates[0].egressAllow[0]", gap: gapEgress},
		{name: "template egressAllow host bits", json: doc("sandboxTemplates", with(publicTemplateOK, `"egressAllow":["10.20.0.1/16"]`)), path: "sandboxTemplates[0].egressAllow[0]", gap: gapEgress},
		{name: "template egressAllow private network", json: doc("sandboxTemplates", with(templateOK, `"egressAllow":["10.20.0.0/16"]`)), path: "sandboxTemplates[0].egressAllow", gap: gapEgress},
		{name: "pool egressAllow not a list", json: doc("pools", with(poolOK, `"policy":{"egressAllow":"10.20.0.0/16"}`)), path: "pools[0].policy.egressAllow"},
		{name: "pool egressAllow number", json: doc("pools", with(poolOK, `"policy":{"egressAllow":[10]}`)), path: "pools[0].policy.egressAllow[0]"},
		{name: "pool egressAllow repeated", json: doc("pools", with(poolOK, `"policy":{"egressAllow":["10.20.0.0/16","10.20.0.0/16"]}`)), path: "pools[0].policy.egressAllow[1]"},
		{name: "pool egressAllow public range", json: doc("pools", with(poolOK, `"policy":{"egressAllow":["10.20.0.0/16","198.51.100.0/24"]}`)), path: "pools[0].policy.egressAllow[1]", gap: gapEgress},
		{name: "pool egressAllow metadata", json: doc("pools", with(poolOK, `"policy":{"egressAllow":["100.64.0.0/10"]}`)), path: "pools[0].policy.egressAllow[0]", gap: gapEgress},
		{name: "template egressAllow outside its pool's policy",
			json: `{"version":1,"pools":[` + with(poolOK, `"policy":{"egressAllow":["10.20.0.0/16"]}`) + `],"sandboxTemplates":[` +
				with(publicTemplateOK, `"egressAllow":["10.20.1.0/24","10.0.0.0/8","192.168.7.0/24"]`) + `]}`,
			paths: []string{"sandboxTemplates[0].egressAllow[1]", "sandboxTemplates[0].egressAllow[2]"}, gap: gapPolicy},
		{name: "template egressAllow on a pool with no policy",
			json:  `{"version":1,"pools":[` + poolOK + `],"sandboxTemplates":[` + with(publicTemplateOK, `"egressAllow":["10.20.0.0/16"]`) + `]}`,
			paths: []string{"sandboxTemplates[0].egressAllow[0]"}, gap: gapPolicy},

		// Every problem, in document order (key order, not struct order).
		{name: "all problems in document order",
			json:  `{"sites":[{"region":"EU","name":"Bad","kind":"x"}],"version":2}`,
			paths: []string{"sites[0].region", "sites[0].name", "sites[0].kind", "version"}},
		{name: "missing fields at the end of their object",
			json:  `{"version":1,"flavors":[{"pool":"p","name":"BAD"},{"name":"ok","pool":"p","vcpu":1,"memoryGiB":1,"diskGiB":1,"gpu":99}]}`,
			paths: []string{"flavors[0].name", "flavors[0].vcpu", "flavors[0].memoryGiB", "flavors[0].diskGiB", "flavors[1].gpu"}},
		{name: "structure and rules interleaved",
			json: `{"version":1,"pools":[{"name":"p","site":"fra","extra":true,"ownerQuota":{"gpu":-1,"vcpu":"8"},` +
				`"offers":[{"tenant":"acme","quota":{"gpu":1.5}},{"tenant":"acme"},{"priority":7}]}]}`,
			paths: []string{"pools[0].extra", "pools[0].ownerQuota.gpu", "pools[0].ownerQuota.vcpu",
				"pools[0].offers[0].quota.gpu", "pools[0].offers[1].tenant", "pools[0].offers[2].tenant", "pools[0].class"}},
		{name: "secret before provider",
			json:  doc("providerAccounts", `{"config":{"token":"hunter2-literal"},"provider":"aws","name":"cloud"}`),
			paths: []string{"providerAccounts[0].config.token", "providerAccounts[0].provider"}},
	}
}

func goodFixtures(t testing.TB) []fixture {
	example, err := os.ReadFile("testdata/example.json")
	if err != nil {
		t.Fatal(err)
	}
	return []fixture{
		{name: "spec example", json: string(example)},
		{name: "version only", json: `{"version":1}`},
		{name: "version 1.0", json: `{"version":1.0}`},
		{name: "empty lists", json: `{"version":1,"sites":[],"providerAccounts":[],"pools":[],"flavors":[],"sandboxTemplates":[]}`},
		{name: "ids as names", json: `{"version":1,"sites":[{"name":"site_01JQ3ZK4Y6M8N9P0Q1R2S3T4V5","kind":"dedicated","region":"us-east-1"}],` +
			`"pools":[{"name":"pool_01JQ3ZK4Y6M8N9P0Q1R2S3T4V5","site":"site_01JQ3ZK4Y6M8N9P0Q1R2S3T4V5","class":"vps-host"}],` +
			`"flavors":[{"pool":"pool_01JQ3ZK4Y6M8N9P0Q1R2S3T4V5","name":"f","vcpu":1,"memoryGiB":1,"diskGiB":1}]}`},
		{name: "every secret reference", json: doc("providerAccounts", `{"name":"cloud","provider":"ionos-cloud","config":{`+
			`"token":"secret://ionos","password":"secret://root/sec_01JQ3ZK4Y6M8N9P0Q1R2S3T4V5","apiKey":"vault://kv/data/ionos#token",`+
			`"clientSecret":"vault://kv/ionos","credentials":"env://IONOS_TOKEN","endpoint":"https://api.ionos.com/cloudapi/v6","location":""}}`)},
		{name: "limits", json: `{"version":1,"pools":[{"name":"p","site":"fra","class":"vps-host","gpuModel":"H100_SXM.80GB-x",` +
			`"policy":{"disruptionBudget":1},"ownerQuota":{"gpu":9007199254740992,"memoryGiB":0,"gpu.l40s":2},` +
			`"offers":[{"tenant":"acme","priority":1000},{"tenant":"globex","priority":0,"quota":{}}]}],` +
			`"flavors":[{"pool":"p","name":"max","vcpu":4096,"memoryGiB":65536,"diskGiB":1048576,"gpu":64},` +
			`{"pool":"p","name":"min","vcpu":1,"memoryGiB":1,"diskGiB":1,"gpu":0}],` +
			`"sandboxTemplates":[{"name":"t","pool":"p","flavor":"max","imageId":"` + strings.Repeat("i", 255) + `","network":"public","warm":{"min":1000,"max":1000}}]}`},
		{name: "numbers written differently", json: `{"version":1e0,"pools":[{"name":"p","site":"fra","class":"vps-host","policy":{"disruptionBudget":1e-400},` +
			`"ownerQuota":{"vcpu":6.4e1,"gpu":-0}}],"flavors":[{"pool":"p","name":"f","vcpu":2.0,"memoryGiB":1E3,"diskGiB":40}]}`},
		{name: "empty maps and policy", json: `{"version":1,"providerAccounts":[{"name":"a","provider":"hetzner-cloud","config":{}}],` +
			`"pools":[{"name":"p","site":"fra","class":"vps-host","policy":{},"ownerQuota":{},"offers":[]}],` +
			`"sandboxTemplates":[{"name":"t","pool":"p","flavor":"f","imageId":"i","env":{},"network":"private","warm":{"min":0,"max":0}}]}`},
		{name: "same flavor name in two pools", json: doc("flavors", flavorOK, strings.Replace(flavorOK, `"pool":"vps-fra"`, `"pool":"burst"`, 1))},
		{name: "same tenant in two pools", json: doc("pools", with(poolOK, `"offers":[{"tenant":"acme"}]`),
			with(strings.Replace(poolOK, "vps-fra", "vps-ber", 1), `"offers":[{"tenant":"acme"}]`))},
		{name: "env values", json: doc("sandboxTemplates", with(templateOK,
			`"env":{"PATH":"/usr/bin:/bin","_X":"","HTML":"<a href=\"x\">&amp;</a>","GREETING":"grüße \u2028 😀","API_TOKEN":"env://API_TOKEN"}`))},
		{name: "runtime and egressAllow", json: doc("sandboxTemplates", with(publicTemplateOK,
			`"runtime":"microvm","egressAllow":["10.20.0.0/16","172.16.5.0/24","192.168.7.1/32","100.64.0.0/16","fd12:3456::/32"]`),
			with(strings.Replace(templateOK, "py-small", "py-process", 1), `"runtime":"process","disconnectGraceSeconds":120`))},
		{name: "egressAllow inside the pool's policy", json: `{"version":1,"pools":[` +
			with(poolOK, `"policy":{"disruptionBudget":0.1,"egressAllow":["10.20.0.0/16","fd12:3456::/32"]}`) + `],"sandboxTemplates":[` +
			with(publicTemplateOK, `"egressAllow":["10.20.0.0/16","10.20.7.0/24","fd12:3456:1::/48"]`) + `]}`},
		{name: "image with registry and unicode", json: doc("sandboxTemplates", strings.Replace(templateOK, "ubuntu-24.04", "registry.example.com/bild-ä:24.04@sha256:abc", 1))},
		{name: "provider pool", json: `{"version":1,"providerAccounts":[` + accountOK + `],"pools":[{"name":"burst","site":"fra","class":"provider","providerAccount":"cloud"}]}`},
		{name: "thousand sites", json: doc("sites", repeat(`{"name":"NAME","kind":"shared","region":"eu"}`, 1000, func(i int) string { return "s" + itoa(i) })...)},
		{name: "whitespace around", json: " \n{\"version\":1}\n\t "},
		{name: "$schema for editors", json: `{"$schema":"https://cubefleet.dev/schemas/fleet-document-v1.json","version":1,"sites":[` + siteOK + `]}`},
		{name: "$schema of any address", json: `{"version":1,"$schema":"./fleet.schema.json"}`},
	}
}

func itoa(i int) string { return strconv.Itoa(i) }

// allFixtures is every fixture, good and bad.
func allFixtures(t testing.TB) []fixture {
	var all []fixture
	for _, f := range goodFixtures(t) {
		f.ok = true
		all = append(all, f)
	}
	return append(all, badFixtures()...)
}
