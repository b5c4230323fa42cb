"""ALFWorld text games, generated offline from the alfworld wheel's floor plans and played on the
real TextWorld/ALFWorld engine. Env: envs.alfworld.env.ALFWorldEnv; panels: envs.alfworld.panels.

Imports stay lazy here so that `import envs` does not pull in textworld/fast-downward.
"""
