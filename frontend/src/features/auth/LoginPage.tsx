import { useState, type FormEvent } from "react";
import { Navigate, useNavigate, useSearchParams } from "react-router";
import { errorMessage } from "../../api/client";
import { useHealth, useLogin, useMe } from "../../api/queries";
import { safeNextPath } from "./RequireAuth";
import { usePageTitle } from "../../lib/hooks";

export function LoginPage() {
  usePageTitle("Log in");
  const me = useMe();
  const login = useLogin();
  const navigate = useNavigate();
  const [params] = useSearchParams();
  const next = safeNextPath(params.get("next"));
  const [username, setUsername] = useState("");
  const [password, setPassword] = useState("");
  const [missing, setMissing] = useState<string | null>(null);

  if (me.data) return <Navigate to={next} replace />;

  const onSubmit = (e: FormEvent<HTMLFormElement>) => {
    e.preventDefault();
    if (!username.trim() || !password) {
      setMissing("Enter your username and password.");
      return;
    }
    setMissing(null);
    login.mutate(
      { username: username.trim(), password },
      { onSuccess: () => navigate(next, { replace: true }) },
    );
  };

  const error = missing ?? (login.isError ? errorMessage(login.error) : null);

  return (
    <main className="login" id="main">
      <div className="login-card">
        <h1 className="login-title">
          <span className="brand-mark" aria-hidden="true">
            L
          </span>
          Lifecycle Console
        </h1>
        <form onSubmit={onSubmit} noValidate aria-describedby={error ? "login-error" : undefined}>
          <div className="field">
            <label htmlFor="login-username">Username</label>
            <input
              id="login-username"
              name="username"
              autoComplete="username"
              autoFocus
              value={username}
              onChange={(e) => setUsername(e.target.value)}
              data-testid="login-username"
            />
          </div>
          <div className="field">
            <label htmlFor="login-password">Password</label>
            <input
              id="login-password"
              name="password"
              type="password"
              autoComplete="current-password"
              value={password}
              onChange={(e) => setPassword(e.target.value)}
              data-testid="login-password"
            />
          </div>
          {error && (
            <p className="form-error" id="login-error" role="alert" data-testid="login-error">
              {error}
            </p>
          )}
          <button type="submit" className="button button-primary button-block" disabled={login.isPending} data-testid="login-submit">
            {login.isPending ? "Logging in…" : "Log in"}
          </button>
        </form>
        {me.isError && (
          <p className="muted small" role="status">
            Could not check for an existing session: {errorMessage(me.error)}
          </p>
        )}
        <LoginHealth />
      </div>
    </main>
  );
}

/** One line of public health so an operator can tell "backend down" from "bad password". */
function LoginHealth() {
  const health = useHealth({ refetchInterval: 15_000 });
  if (health.isPending) return null;
  if (health.isError && !health.data) {
    return (
      <p className="login-health muted small" data-testid="login-health-status">
        System status unavailable: {errorMessage(health.error)}
      </p>
    );
  }
  if (!health.data) return null;
  const failing = Object.entries(health.data.components)
    .filter(([, c]) => !c.ok)
    .map(([name]) => name);
  return (
    <p className="login-health muted small" data-testid="login-health-status">
      System status: <strong className={health.data.status === "ok" ? "ok-text" : "fail-text"}>{health.data.status}</strong>
      {failing.length > 0 && <> — failing: {failing.join(", ")}</>}
    </p>
  );
}
