/**
 * The rules of a central campaign's descriptor (`CampaignConfig._check_central` of Python, in its order,
 * with its messages): no recurring rounds, no device mechanism, δ, the group size, one budget (ε with an
 * optional δ, or zCDP ρ), the adjacency. In the bundle's second file, loaded only for central campaigns;
 * the descriptor's own checks are passed in.
 */
import { InvalidConfig, fmtG, pyRepr, show } from './errors.js';
import { isJsonInt, isJsonNumber, unbox } from './json.js';

/** Check and normalize the central options of `c` (a Campaign being built). */
export function checkCentral(c, { checkChoice, checkNumber, CENTRAL_DELTA_RANGE, MAX_RHO, MAX_GROUP_SIZE, MAX_BUDGET, ADJACENCIES }) {
  if (c.recurring) {
    throw new InvalidConfig(
      "'recurring' applies to local campaigns only: a central campaign's curator sees each raw answer, so " +
      'there is no permanent randomized response to reuse across rounds',
    );
  }
  if (c.mechanism !== 'none' && !c.isSurvey) {
    throw new InvalidConfig(
      "central campaigns have no device mechanism: 'mechanism' must be 'none' (or 'auto', or left out, when " +
      `creating one), got ${show(c.mechanism)}`,
    );
  }
  const [low, high] = CENTRAL_DELTA_RANGE;
  for (const name of ['delta', 'budget_delta']) {
    const value = c[name];
    if (value !== null) {
      const x = unbox(value);
      if (!isJsonNumber(value) || !(low <= x && x <= high)) {
        throw new InvalidConfig(`${pyRepr(name)} must be a number in [${fmtG(low)}, ${fmtG(high)}], got ${show(value)}`);
      }
      c[name] = x;
    }
  }
  if (c.group_size !== null && (!isJsonInt(c.group_size) || c.group_size < 1 || c.group_size > MAX_GROUP_SIZE)) {
    throw new InvalidConfig(
      `'group_size' must be an integer in [1, ${MAX_GROUP_SIZE}] (reports one respondent may contribute), ` +
      `got ${show(c.group_size)}`,
    );
  }
  if (c.budget_rho !== null) {
    if (c.budget !== null || c.budget_delta !== null) {
      throw new InvalidConfig(
        "state one budget: 'budget' (ε, with 'budget_delta' for (ε, δ)) or 'budget_rho' (zCDP), not both",
      );
    }
    c.budget_rho = checkNumber('budget_rho', c.budget_rho, MAX_RHO);
  } else {
    if (c.budget === null) {
      throw new InvalidConfig("central campaigns need a 'budget': the total ε of all releases (or 'budget_rho' for zCDP)");
    }
    const budget = checkNumber('budget', c.budget, MAX_BUDGET);
    if (budget < c.epsilon) {
      throw new InvalidConfig(
        `'budget' (${fmtG(budget)}) must be at least 'epsilon' (${fmtG(c.epsilon)}), the ε of one release`,
      );
    }
    c.budget = budget;
  }
  const adjacency = c.adjacency ?? 'add-remove';
  checkChoice('adjacency', adjacency, ADJACENCIES);
  c.adjacency = adjacency;
}
