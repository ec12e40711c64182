import type { Role, User } from "../../api/types";

const RANK: Record<Role, number> = { viewer: 0, operator: 1, admin: 2 };

/** True when the user's role is at least `min` (viewer < operator < admin). */
export function hasRole(user: User | null | undefined, min: Role): boolean {
  if (!user) return false;
  const rank = RANK[user.role];
  return rank !== undefined && rank >= RANK[min];
}

export const canOperate = (user: User | null | undefined) => hasRole(user, "operator");

/** Admins manage configuration: namespaces, policies, nodes, users. */
export const canAdminister = (user: User | null | undefined) => hasRole(user, "admin");
