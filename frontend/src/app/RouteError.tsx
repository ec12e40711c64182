import { isRouteErrorResponse, Link, useRouteError } from "react-router";
import { errorMessage } from "../api/client";

/** Router error element: a render error shows a message, never a blank page. */
export function RouteError() {
  const error = useRouteError();
  const message = isRouteErrorResponse(error)
    ? `${error.status} ${error.statusText}`
    : errorMessage(error);
  return (
    <main className="page page-narrow" id="main">
      <div className="state state-error" role="alert">
        <strong>This page failed to render</strong>
        <p className="state-message">{message}</p>
        <p className="muted">
          Try <button type="button" className="link-button" onClick={() => window.location.reload()}>reloading</button>{" "}
          or go back to the <Link to="/">overview</Link>.
        </p>
      </div>
    </main>
  );
}
