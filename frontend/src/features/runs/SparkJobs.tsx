// Start a Spark job (python -m spark_jobs <job>) as a task run: POST /api/spark-jobs.
import { useState, type FormEvent } from "react";
import { Link } from "react-router";
import { useStartSparkJob } from "../../api/queries";
import type { SparkJobRequest, TaskRun } from "../../api/types";
import { FieldMessage, fieldErrorsOf, formLevelMessage } from "../../components/Form";

type NamespaceUse = "optional" | "required";

export const SPARK_JOBS: { job: string; label: string; namespace: NamespaceUse; help: string }[] = [
  { job: "lake-export", label: "Lake export", namespace: "optional", help: "Sealed segments → the Parquet lake (incremental)." },
  {
    job: "lifecycle-report",
    label: "Lifecycle report",
    namespace: "optional",
    help: "Per namespace and day: expired-not-reclaimed, lifetimes, duplicate keys; shown on the namespace page.",
  },
  {
    job: "compaction-plan",
    label: "Compaction plan",
    namespace: "required",
    help: "Latest offset per key across the sealed segments; writes the plan (apply it with a compaction).",
  },
  {
    job: "ttl-backfill",
    label: "TTL backfill",
    namespace: "required",
    help: "Give existing records an expiry by tag or key prefix; the node loads the entries and the next scan expires them.",
  },
];

/** The request the form describes (ttl-backfill carries its rule in `params`). */
export function sparkJobRequest(
  job: string,
  namespace: string,
  rule: { by: "tag" | "key_prefix"; value: string; ttl: string },
): SparkJobRequest {
  const body: SparkJobRequest = { job, namespace: namespace || null };
  if (job === "ttl-backfill") body.params = { [rule.by]: rule.value.trim(), ttl: rule.ttl.trim() };
  return body;
}

export function SparkJobPanel({ namespaces, onStarted }: { namespaces: string[]; onStarted?: (run: TaskRun) => void }) {
  const start = useStartSparkJob();
  const [job, setJob] = useState(SPARK_JOBS[0]!.job);
  const [namespace, setNamespace] = useState("");
  const [by, setBy] = useState<"tag" | "key_prefix">("tag");
  const [value, setValue] = useState("");
  const [ttl, setTtl] = useState("");
  const def = SPARK_JOBS.find((j) => j.job === job) ?? SPARK_JOBS[0]!;
  const errors = fieldErrorsOf(start.error);
  const inline = new Set(["job", "namespace", "params", "params.tag", "params.key_prefix", "params.ttl"]);
  const message = formLevelMessage(start.error, inline);
  const ruleErrors = errors["params.tag"] ?? errors["params.key_prefix"] ?? errors.params;

  const onSubmit = (e: FormEvent<HTMLFormElement>) => {
    e.preventDefault();
    start.mutate(sparkJobRequest(job, namespace, { by, value, ttl }), { onSuccess: (run) => onStarted?.(run) });
  };

  return (
    <section className="card section" aria-labelledby="spark-jobs-title" data-testid="spark-job-panel">
      <h2 id="spark-jobs-title">Start a Spark job</h2>
      <form className="inline-form" onSubmit={onSubmit} noValidate>
        <div className="field field-medium">
          <label htmlFor="spark-job">Job</label>
          <select
            id="spark-job"
            value={job}
            onChange={(e) => {
              setJob(e.target.value);
              start.reset();
            }}
            data-testid="spark-job"
            aria-describedby={errors.job ? "spark-job-error" : "spark-job-hint"}
          >
            {SPARK_JOBS.map((j) => (
              <option key={j.job} value={j.job}>
                {j.label}
              </option>
            ))}
          </select>
          <FieldMessage id="spark-job" errors={errors.job} hint={def.help} />
        </div>
        <div className="field field-medium">
          <label htmlFor="spark-namespace">Namespace{def.namespace === "optional" ? " (optional)" : ""}</label>
          <select
            id="spark-namespace"
            value={namespace}
            onChange={(e) => setNamespace(e.target.value)}
            data-testid="spark-namespace"
            aria-describedby={errors.namespace ? "spark-namespace-error" : "spark-namespace-hint"}
          >
            <option value="">{def.namespace === "optional" ? "all namespaces" : "choose…"}</option>
            {namespaces.map((n) => (
              <option key={n} value={n}>
                {n}
              </option>
            ))}
          </select>
          <FieldMessage
            id="spark-namespace"
            errors={errors.namespace}
            hint={def.namespace === "optional" ? "Empty: every namespace." : "This job works on one namespace."}
          />
        </div>
        {job === "ttl-backfill" && (
          <>
            <div className="field field-narrow">
              <label htmlFor="spark-rule-by">Rule</label>
              <select id="spark-rule-by" value={by} onChange={(e) => setBy(e.target.value as "tag" | "key_prefix")} data-testid="spark-rule-by">
                <option value="tag">tag</option>
                <option value="key_prefix">key prefix</option>
              </select>
            </div>
            <div className="field field-medium">
              <label htmlFor="spark-rule-value">{by === "tag" ? "Tag" : "Key prefix"}</label>
              <input
                id="spark-rule-value"
                value={value}
                onChange={(e) => setValue(e.target.value)}
                autoComplete="off"
                data-testid="spark-rule-value"
                aria-describedby={ruleErrors ? "spark-rule-value-error" : "spark-rule-value-hint"}
              />
              <FieldMessage
                id="spark-rule-value"
                errors={ruleErrors}
                hint={by === "tag" ? "Records carrying this tag." : "Records whose key starts with this."}
              />
            </div>
            <div className="field field-narrow">
              <label htmlFor="spark-rule-ttl">TTL</label>
              <input
                id="spark-rule-ttl"
                value={ttl}
                onChange={(e) => setTtl(e.target.value)}
                placeholder="e.g. 7d"
                autoComplete="off"
                data-testid="spark-rule-ttl"
                aria-describedby={errors["params.ttl"] ? "spark-rule-ttl-error" : "spark-rule-ttl-hint"}
              />
              <FieldMessage id="spark-rule-ttl" errors={errors["params.ttl"]} hint="1h, 30m, 7d or ms" />
            </div>
          </>
        )}
        <div className="field field-action">
          <button type="submit" className="button" disabled={start.isPending} data-testid="spark-job-submit">
            {start.isPending ? "Starting…" : "Start job"}
          </button>
        </div>
      </form>
      {message && (
        <p className="form-error" role="alert" data-testid="spark-job-error">
          {message}
        </p>
      )}
      {start.data && (
        <p className="form-success small" role="status" data-testid="spark-job-started">
          Started run{" "}
          <Link to={`/tasks?run=${start.data.id}`} data-testid="spark-job-run-link">
            #{start.data.id}
          </Link>{" "}
          ({def.label}); it is listed below.
        </p>
      )}
    </section>
  );
}
