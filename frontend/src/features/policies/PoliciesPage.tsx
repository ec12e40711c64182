import { PolicyPanel } from "./PolicyEditor";
import { usePageTitle } from "../../lib/hooks";

export default function PoliciesPage() {
  usePageTitle("Policies");
  return (
    <div className="page">
      <div className="page-header">
        <div>
          <h1>Cluster default policy</h1>
          <p className="muted">
            Every namespace inherits these values unless it overrides them (built-in → cluster → namespace). Node
            policies are on the Nodes page.
          </p>
        </div>
      </div>
      <PolicyPanel scope={{ kind: "cluster" }} />
    </div>
  );
}
