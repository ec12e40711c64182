// The page registry: one entry per page gives its route and, optionally, its
// left-nav entry. Add later pages (Policies, Segments, Tasks, Alerts,
// Messages, Nodes, Audit, namespace detail...) here. Chart-heavy pages should
// be code-split with React.lazy so echarts stays out of the entry bundle:
//   const AlertsPage = lazy(() => import("../pages/AlertsPage"));

import type { ReactNode } from "react";
import type { Role } from "../api/types";
import { NamespacesPage } from "../pages/NamespacesPage";
import { OverviewPage } from "../pages/OverviewPage";

export interface AppPage {
  /** Route path under the app shell ("" = index "/"). */
  path: string;
  element: ReactNode;
  /** Left-nav label; pages without one (e.g. detail pages) are not in the nav. */
  navLabel?: string;
  /** Hide the nav entry below this role (the backend still enforces access). */
  minRole?: Role;
}

export const appPages: AppPage[] = [
  { path: "", element: <OverviewPage />, navLabel: "Overview" },
  { path: "namespaces", element: <NamespacesPage />, navLabel: "Namespaces" },
];
