"""Recipes (issue 27): a sweep's winner as one JSON file that another node checks.

    recipe_file  build a recipe from the results store; the schema; secrets kept out
    signing      OpenSSH signatures (`ssh-keygen -Y sign/verify`, namespace bwtune-recipe),
                 naming the top-level field that changed since signing
    check        compare a recipe with hosts' facts (hardware group, stack inputs)
    apply        what `bwtune recipe apply` serves, on which hosts; the provision inputs
    verify       a scratch sweep of the recipe's one config, compared with its numbers

Application code: the `bwtune recipe` command (bwtune.commands.recipe) parses and prints;
nothing here imports a command. docs/recipes.md.
"""
