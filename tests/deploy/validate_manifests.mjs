// Validates rendered Kubernetes manifests against their schemas (tests/deploy/manifests_test.py
// runs it): core and apps objects with kubernetes-models' generated validators, JobSets with
// ajv against the JobSet CRD's OpenAPI schema. Prints one JSON line: what was validated, what
// was skipped and why, and every error; exits 1 if there is an error.
//
//   node validate_manifests.mjs FILE.yaml... [--crd JOBSET_CRD.yaml]
import fs from "node:fs";
import yaml from "js-yaml";
import Ajv from "ajv";

const args = process.argv.slice(2);
const crdAt = args.indexOf("--crd");
const crdPath = crdAt >= 0 ? args[crdAt + 1] : null;
const files = args.filter((a, i) => a !== "--crd" && (crdAt < 0 || i !== crdAt + 1));

let jobsetValidator = null;
const skipped = [];
if (crdPath && fs.existsSync(crdPath)) {
  const crd = yaml.load(fs.readFileSync(crdPath, "utf8"));
  const version = crd.spec.versions.find((v) => v.served);
  // The CRD's schema has Kubernetes' own keywords (x-kubernetes-*) and formats (int32):
  // not JSON Schema's, so ajv is told to let them be.
  const ajv = new Ajv({ strict: false, allErrors: true, validateFormats: false });
  jobsetValidator = { version: version.name, validate: ajv.compile(version.schema.openAPIV3Schema) };
} else {
  skipped.push(`JobSet schema: no CRD at ${crdPath ?? "(none given)"} (jobset.x-k8s.io_jobsets.yaml, in ../shared/kubernetes)`);
}

const validated = [];
const errors = [];
for (const file of files) {
  for (const doc of yaml.loadAll(fs.readFileSync(file, "utf8"))) {
    if (!doc) continue;
    const name = `${file}: ${doc.kind}/${doc.metadata?.name}`;
    const [group, version] = doc.apiVersion.includes("/") ? doc.apiVersion.split("/") : ["", doc.apiVersion];
    if (group === "jobset.x-k8s.io") {
      if (!jobsetValidator) continue;
      if (version !== jobsetValidator.version) {
        errors.push(`${name}: apiVersion ${doc.apiVersion}, the CRD serves ${jobsetValidator.version}`);
      } else if (!jobsetValidator.validate(doc)) {
        for (const e of jobsetValidator.validate.errors) errors.push(`${name}: ${e.instancePath} ${e.message}`);
      }
      validated.push(name);
      continue;
    }
    let model;
    try {
      const module = await import(`kubernetes-models/${group ? group + "/" : ""}${version}/${doc.kind}`);
      model = module[doc.kind];
    } catch (e) {
      errors.push(`${name}: no schema for ${doc.apiVersion} ${doc.kind} (${e.message.split("\n")[0]})`);
      continue;
    }
    try {
      new model(doc).validate();
      validated.push(name);
    } catch (e) {
      errors.push(`${name}: ${e.message}`);
    }
  }
}
console.log(JSON.stringify({ validated, skipped, errors }));
process.exit(errors.length ? 1 : 0);
