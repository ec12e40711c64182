import type { ReactNode } from "react";
import { Navigate, useLocation } from "react-router";
import { useMe } from "../../api/queries";
import { ErrorState, LoadingState } from "../../components/States";

/** Renders children for a logged-in user; otherwise redirects to /login?next=… */
export function RequireAuth({ children }: { children: ReactNode }) {
  const me = useMe();
  const location = useLocation();

  if (me.isPending) {
    return (
      <main className="page page-narrow" id="main">
        <LoadingState label="Checking your session…" />
      </main>
    );
  }
  if (me.isError && me.data === undefined) {
    return (
      <main className="page page-narrow" id="main">
        <ErrorState
          title="Could not check your session"
          error={me.error}
          onRetry={() => void me.refetch()}
          retrying={me.isFetching}
        />
      </main>
    );
  }
  if (!me.data) {
    const next = `${location.pathname}${location.search}${location.hash}`;
    const to = next && next !== "/" ? `/login?next=${encodeURIComponent(next)}` : "/login";
    return <Navigate to={to} replace />;
  }
  return <>{children}</>;
}

/** Only allow same-app paths as a post-login target ("/x", not "//evil" or "http:"). */
export function safeNextPath(next: string | null): string {
  if (!next || !next.startsWith("/") || next.startsWith("//") || next.startsWith("/\\")) return "/";
  if (next.startsWith("/login")) return "/";
  return next;
}
