import { Suspense } from "react";
import { NavLink, Outlet, useNavigate } from "react-router";
import { errorMessage } from "../api/client";
import { useLogout, useMe } from "../api/queries";
import { appPages } from "./pages";
import { hasRole } from "../features/auth/roles";
import { LoadingState } from "../components/States";

export function AppShell() {
  const { data: user } = useMe();
  const logout = useLogout();
  const navigate = useNavigate();

  const onLogout = () => {
    logout.mutate(undefined, {
      onSuccess: () => navigate("/login", { replace: true }),
    });
  };

  const navPages = appPages.filter((p) => p.navLabel && (!p.minRole || hasRole(user, p.minRole)));

  return (
    <div className="shell">
      <a className="skip-link" href="#main">
        Skip to content
      </a>
      <header className="shell-header">
        <div className="brand">
          <span className="brand-mark" aria-hidden="true">
            L
          </span>
          Lifecycle Console
        </div>
        <div className="header-user">
          {user && (
            <span data-testid="current-user">
              <span className="user-name">{user.username}</span>{" "}
              <span className="muted">({user.role})</span>
            </span>
          )}
          <button
            type="button"
            className="button button-secondary"
            onClick={onLogout}
            disabled={logout.isPending}
            data-testid="logout"
          >
            {logout.isPending ? "Logging out…" : "Log out"}
          </button>
          {logout.isError && (
            <span className="error-text" role="alert">
              {errorMessage(logout.error)}
            </span>
          )}
        </div>
      </header>
      <nav className="shell-nav" aria-label="Main">
        <ul>
          {navPages.map((p) => (
            <li key={p.path}>
              <NavLink
                to={p.path === "" ? "/" : `/${p.path}`}
                end={p.path === ""}
                className="nav-link"
                data-testid={`nav-${p.id}`}
              >
                {p.navLabel}
              </NavLink>
            </li>
          ))}
        </ul>
      </nav>
      <main className="shell-main" id="main" tabIndex={-1}>
        <Suspense fallback={<LoadingState label="Loading page…" />}>
          <Outlet />
        </Suspense>
      </main>
    </div>
  );
}
