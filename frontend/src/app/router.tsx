import { createBrowserRouter, type RouteObject } from "react-router";
import { RequireAuth } from "../features/auth/RequireAuth";
import { AppShell } from "./AppShell";
import { RouteError } from "./RouteError";
import { LoginPage } from "../features/auth/LoginPage";
import { NotFoundPage } from "./NotFoundPage";
import { appPages } from "./pages";

export const routes: RouteObject[] = [
  { path: "/login", element: <LoginPage />, errorElement: <RouteError /> },
  {
    path: "/",
    element: (
      <RequireAuth>
        <AppShell />
      </RequireAuth>
    ),
    errorElement: <RouteError />,
    children: [
      ...appPages.map((p): RouteObject =>
        p.path === "" ? { index: true, element: p.element } : { path: p.path, element: p.element },
      ),
      { path: "*", element: <NotFoundPage /> },
    ],
  },
];

export function createRouter() {
  return createBrowserRouter(routes);
}
