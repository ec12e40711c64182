import { Link, useLocation } from "react-router";
import { usePageTitle } from "../lib/hooks";

export function NotFoundPage() {
  const location = useLocation();
  usePageTitle("Not found");
  return (
    <div className="page">
      <h1>Page not found</h1>
      <p>
        There is no page at <code>{location.pathname}</code>. Go to the <Link to="/">overview</Link>.
      </p>
    </div>
  );
}
